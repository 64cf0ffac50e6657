"""A partner that sees every row, and the per-task blend of it with the model, chosen on held-out
labeled positives.

Why. A forward pass sees a bounded view of the table (at most ``max_labeled`` labeled rows and
one chunk of the pool, :mod:`puicl_model.planning`), so on large tables the model's scores stop
improving with data while a classical learner fitted on every row keeps improving
(docs/classifier.md, "Tables of every size"). The partner is such a learner: a logistic
regression of labeled (1) against unlabeled (0) on the classifier's own encoding of the table
(a "non-traditional classifier", Elkan & Noto, KDD 2008: under SCAR, P(labeled | x) ranks rows
as P(y = 1 | x) does), cross-fitted so that no row is scored by a model trained on it.

How the blend is chosen. Some labeled positives are *held out*: never context of a pass, they
are scored as pool rows by the same passes. Under SCAR they are distributed as the pool's
positives, so for any score function the AUC of held-out positives against the pool is
``(1 − π)/2 + π · AUC`` (Jain, White & Radivojac, arXiv 1702.00518), where AUC is the score's
true positive-against-negative AUC on the pool: the candidate with the highest held-out AUC has
the highest true AUC, read on the task itself with no negative label. The candidates blend the
model's and the partner's log-odds, each standardized on the pool, with weights
:data:`BLEND_WEIGHTS` on the model (1: the model alone, 0: the partner alone).

What comes out stays a probability. The blend's scores order the pool; each pool row then gets
the model's pool probability of the same rank (a monotone recalibration that keeps the model's
distribution of probabilities over the pool: the same mean P(y = 0), the same share above 0.5).
A new row's probability is read off that map at its blended score. With weight 1 the map is the
identity and every probability is the model's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

__all__ = ["BLEND_WEIGHTS", "MAX_HELD_OUT", "MIN_LABELED_FOR_PARTNER", "MIN_POOL_FOR_PARTNER",
           "PARTNER_FOLDS", "Blend", "LogisticPartner", "choose_blend", "held_out_rows"]

# the partner runs on tables with at least this many labeled positives: twice what one pass
# holds (InferenceSettings.max_labeled), so that holding half of them out leaves the passes'
# context as many rows as a pass takes; smaller tables are the trained range, scored by the
# model alone
MIN_LABELED_FOR_PARTNER = 600
# ... and at least this many unlabeled rows: the partner's folds each need pool rows, and the
# held-out AUC that picks the blend needs a pool to rank against
MIN_POOL_FOR_PARTNER = 100
# the most labeled positives held out (half of them up to this): enough to rank the blends,
# while each adds a row for the passes to score
MAX_HELD_OUT = 1000

# the weights on the model that the blend is chosen from; ties go to the higher weight
BLEND_WEIGHTS = (1.0, 0.75, 0.5, 0.25, 0.0)
# the partner's cross-fitting folds
PARTNER_FOLDS = 5
# spawn-key tags of the held-out positives and of the partner's folds (planning uses 1-5,
# class_prior 11; prior_report's bootstrap draws sit under (12, 0) and (12, 1, ...), keys
# distinct from the held-out draw's (12,))
HELD_OUT_TAG = 12
PARTNER_TAG = 13
# clip of probabilities before their log-odds are taken
_EPS = 1e-6


def held_out_rows(n_labeled: int, n_held: int, entropy: int) -> np.ndarray:
    """The mask of the ``n_held`` labeled rows held out of every pass's context, drawn under
    the key ``(HELD_OUT_TAG,)`` of the fit's root seed."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(HELD_OUT_TAG,)))
    mask = np.zeros(n_labeled, dtype=bool)
    mask[rng.choice(n_labeled, size=n_held, replace=False)] = True
    return mask


def _log_odds(proba: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(proba, dtype=np.float64), _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


@dataclass
class LogisticPartner:
    """Logistic regression of labeled against unlabeled rows, cross-fitted over every row.

    ``fit`` returns the out-of-fold log-odds of P(labeled | x) of the labeled rows and of the
    pool; ``decision`` scores other rows by the mean log-odds of the fold models."""

    entropy: int
    folds: int = PARTNER_FOLDS
    C: float = 1.0

    def fit(self, x_labeled: np.ndarray, x_pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold

        x = np.vstack([x_labeled, x_pool]).astype(np.float64)
        target = np.r_[np.ones(len(x_labeled), np.int64), np.zeros(len(x_pool), np.int64)]
        seed = np.random.SeedSequence(self.entropy, spawn_key=(PARTNER_TAG,))
        split = StratifiedKFold(n_splits=self.folds, shuffle=True,
                                random_state=int(seed.generate_state(1)[0] % 2**31))
        scores = np.empty(len(x))
        self.models_ = []
        for train, held in split.split(x, target):
            model = LogisticRegression(C=self.C, max_iter=1000)
            model.fit(x[train], target[train])
            scores[held] = model.decision_function(x[held])
            self.models_.append(model)
        return scores[: len(x_labeled)], scores[len(x_labeled):]

    def decision(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.mean([model.decision_function(x) for model in self.models_], axis=0)


def _held_out_auc(held: np.ndarray, pool: np.ndarray) -> float:
    """AUC of held-out positives against the pool (Mann–Whitney, ties count ½)."""
    ranks = rankdata(np.r_[held, pool])
    n_h, n_p = len(held), len(pool)
    return float((ranks[:n_h].sum() - n_h * (n_h + 1) / 2) / (n_h * n_p))


@dataclass(frozen=True)
class Blend:
    """The chosen blend of the model's and the partner's scores, and how to apply it."""

    weight: float  # on the model; 1 - weight on the partner
    held_out_auc: dict[float, float]  # per candidate weight
    model_centre: float
    model_scale: float
    partner_centre: float
    partner_scale: float
    pool_scores: np.ndarray  # the pool's blended scores, sorted
    pool_proba: np.ndarray  # the model's pool probabilities, sorted

    def score(self, model_proba: np.ndarray, partner_log_odds: np.ndarray) -> np.ndarray:
        model = (_log_odds(model_proba) - self.model_centre) / self.model_scale
        partner = (np.asarray(partner_log_odds) - self.partner_centre) / self.partner_scale
        return self.weight * model + (1.0 - self.weight) * partner

    def proba(self, model_proba: np.ndarray, partner_log_odds: np.ndarray) -> np.ndarray:
        """P(y = 1) of rows from their model probability and partner log-odds: the pool's
        probability of the same blended score (interpolated between pool rows)."""
        if self.weight == 1.0:
            return np.asarray(model_proba, dtype=np.float64)
        scores = self.score(model_proba, partner_log_odds)
        return np.interp(scores, self.pool_scores, self.pool_proba)


def _standardizer(values: np.ndarray) -> tuple[float, float]:
    scale = float(values.std())
    return float(values.mean()), scale if scale > 1e-12 else 1.0


def choose_blend(model_pool: np.ndarray, model_held: np.ndarray, partner_pool: np.ndarray,
                 partner_held: np.ndarray) -> Blend:
    """The candidate of :data:`BLEND_WEIGHTS` whose held-out positives score highest against
    the pool (model scores: P(y=1); partner scores: log-odds)."""
    model_pool = np.asarray(model_pool, dtype=np.float64)
    model_centre, model_scale = _standardizer(_log_odds(model_pool))
    partner_centre, partner_scale = _standardizer(np.asarray(partner_pool, dtype=np.float64))
    # each side standardized once; a candidate weighs them as Blend.score does
    model = [(_log_odds(p) - model_centre) / model_scale for p in (model_pool, model_held)]
    partner = [(np.asarray(p) - partner_centre) / partner_scale
               for p in (partner_pool, partner_held)]

    def blended(weight: float, side: int) -> np.ndarray:
        return weight * model[side] + (1.0 - weight) * partner[side]

    aucs = {weight: _held_out_auc(blended(weight, 1), blended(weight, 0))
            for weight in BLEND_WEIGHTS}
    best = max(BLEND_WEIGHTS, key=lambda w: (aucs[w], w))  # ties: more weight on the model
    return Blend(best, aucs, model_centre, model_scale, partner_centre, partner_scale,
                 np.sort(blended(best, 0), kind="stable"), np.sort(model_pool, kind="stable"))
