"""π, the negative share of the unlabeled pool, estimated from the model's scores.

**Cross-fitted scores.** Every estimator compares how the model scores known positives with
how it scores the pool. The labeled positives cannot be scored as context rows, so they are
cross-fitted (:func:`cross_fitted_scores`): split at random into ``K`` folds, each fold ``k``
is appended to the pool as if it were unlabeled and scored by a transductive pass (the same
kind of pass that scores the pool) next to the other ``K − 1`` folds as labeled rows. One such
scoring per fold gives, from the same passes, the held-out positives' P(y=1) and the pool's
P(y=1), so the two samples an estimator compares differ only in their rows, never in how they
were scored. Cost: ``K`` scorings of (pool + n_labeled/K) rows next to (K − 1)/K of the
labeled rows, each about as long as the pool's own scoring, every ensemble member included.

**Estimators.** Each reads one (held-out, pool) pair of scores per fold. Positives are a share
α = 1 − π of the pool, so the pool's score density is f_U = α f_P + (1 − α) f_N.

* :func:`best_bin_alpha`: Best Bin Estimation (BBE), Garg, Wu, Smola, Balakrishnan & Lipton,
  "Mixture Proportion Estimation and PU Learning: A Modern Approach" (NeurIPS 2021), Alg. 1.
  For a cut c let q_P(c) and q_U(c) be the shares of each sample scoring at least c;
  q_U(c) ≥ α q_P(c) for every c, with near equality where only positives score above c (the
  "best bin"). The estimate is q_U(ĉ) / q_P(ĉ) at the cut that minimizes that ratio plus a
  confidence slack:

      ĉ = argmin_c  q_U(c)/q_P(c) + (1+γ)/q_P(c) · ( √(log(1/δ)/(2 n_U)) + √(log(1/δ)/(2 n_P)) )

  with the authors' δ = 0.1, γ = 0.01. A cut needs at least two rows of each sample above it.
  BBE estimates α from the region where positives alone score (irreducibility): where the
  classes' scores overlap everywhere it overestimates α, so π̂ falls short of π by about the
  share of the pool's positives that no score separates from negatives.
* :func:`mean_estimate`: the pool's mean P(y=0).

:func:`class_prior_estimate` is the classifier's π̂ (``PUICLClassifier.estimate_class_prior``),
read off the scores alone so that the class-prior study (``studies/puicl_prior.py``)
recomputes it from kept scores.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from puicl_model.estimator.ensemble import View
from puicl_model.estimator.evidence_rows import HeldRows
from puicl_model.passes import seed_keys
from puicl_model.passes.phases import phase
from puicl_model.passes.planning import PassPlanner, ViewRows

__all__ = ["DEFAULT_FOLDS", "MIN_LABELED_FOR_ESTIMATES", "PRIOR_POOL_ROWS", "Folds",
           "best_bin_alpha", "best_bin_estimate", "class_prior_estimate",
           "cross_fitted_scores", "fold_of", "mean_estimate", "prior_cut", "prior_pool_rows"]

# the labeled positives' folds for estimate_class_prior: K = 3 and 5 gave the same π̂ errors on
# the development suite for 1.5x and 2.8x the time (docs/classifier_measurements.md)
DEFAULT_FOLDS = 2
# the fewest labeled positives whose split in folds the score-based estimators run on
MIN_LABELED_FOR_ESTIMATES = 20
# a pool of more rows, scored through shared contexts, has its folds scored against a seeded
# sample of this many (:func:`prior_pool_rows`): each fold then costs its contexts and about a
# tenth of a 20,000-row pool's query rows, where it cost as much as the pool's own scoring. The
# pool's mean P(y=0) still reads every row; BBE reads the sample (its shares move by about
# 1/sqrt(2,000) = 0.02 at most from the pool's)
PRIOR_POOL_ROWS = 2000

# per fold of the labeled positives: (the held-out fold's P(y=1), the pool's P(y=1)), both
# scored by the same passes next to the other folds
Folds = Sequence[tuple[np.ndarray, np.ndarray]]

class Scorer(Protocol):
    """Scores the pool rows of some views (``rows``: only those, against the contexts planned
    over the whole pool) by the passes of some planners: (mean P(y=1), passes run)
    (:class:`puicl_model.passes.inference.PassScorer`)."""

    def __call__(self, planners: Sequence[PassPlanner], views: Sequence[ViewRows],
                 rows: np.ndarray | None = None) -> tuple[np.ndarray, int]: ...


def fold_of(n_labeled: int, n_folds: int, entropy: int) -> np.ndarray:
    """Each labeled row's fold in 0..n_folds−1: near-equal folds, drawn under the key
    ``(seed_keys.PRIOR_FOLDS, n_folds)`` of the fit's root seed."""
    if not 2 <= n_folds <= n_labeled // 2:
        raise ValueError(f"n_folds must be from 2 to half the labeled rows ({n_labeled // 2}), "
                         f"got {n_folds}")
    seed = np.random.SeedSequence(entropy, spawn_key=(seed_keys.PRIOR_FOLDS, n_folds))
    return np.random.default_rng(seed).permutation(n_labeled) % n_folds


def prior_pool_rows(n_pool: int, entropy: int) -> np.ndarray | None:
    """The pool rows (sorted) the class prior's folds are scored against: None (every row) on
    a pool of at most :data:`PRIOR_POOL_ROWS`, else a sample of that many keyed
    ``(seed_keys.PRIOR_POOL,)``."""
    if n_pool <= PRIOR_POOL_ROWS:
        return None
    rng = np.random.default_rng(np.random.SeedSequence(entropy,
                                                       spawn_key=(seed_keys.PRIOR_POOL,)))
    return np.sort(rng.permutation(n_pool)[:PRIOR_POOL_ROWS])


def cross_fitted_scores(score: Scorer, planners: Sequence[PassPlanner], views: Sequence[View],
                        n_folds: int = DEFAULT_FOLDS, pool_rows: np.ndarray | None = None,
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per fold of the fitted labeled positives: (the fold's P(y=1), the pool's P(y=1)), the
    fold appended to the pool and scored by its passes next to the other folds (every member
    of the ensemble, ``planners[i]`` reading ``views[planners[i].view]``, each view with its
    own encoding of the rows). ``score`` is the fitted classifier's ``scorer_``.
    ``pool_rows``: only those pool rows are scored (beside the fold), against the contexts
    drawn from the whole pool, where every planner shares its contexts."""
    n_pool = planners[0].n_pool
    fold = fold_of(len(views[0].x_labeled), n_folds, planners[0].entropy)
    scores = []
    for k in range(n_folds):
        held = fold == k
        n_held = int(held.sum())
        rows = [view.with_fold_in_pool(held).rows() for view in views]
        subs = [dataclasses.replace(p, n_labeled=int((~held).sum()), n_pool=n_pool + n_held)
                for p in planners]
        with phase(f"estimating π: fold {k + 1} of {n_folds}"):
            if pool_rows is None:
                proba, _ = score(subs, rows)
            else:
                asked = np.concatenate([pool_rows,
                                        HeldRows.positions(n_pool, np.arange(n_held))])
                proba, _ = score(subs, rows, rows=asked)
        pool_proba, held_proba = HeldRows.split(proba, n_held)
        scores.append((held_proba, pool_proba))
    return scores


def best_bin_alpha(positive_scores: np.ndarray, unlabeled_scores: np.ndarray,
                   delta: float = 0.1, gamma: float = 0.01) -> float:
    """α̂ in [0, 1]: the estimated share of positives in the unlabeled sample."""
    positive = np.sort(np.asarray(positive_scores, dtype=np.float64))
    unlabeled = np.sort(np.asarray(unlabeled_scores, dtype=np.float64))
    n_p, n_u = len(positive), len(unlabeled)
    if n_p == 0 or n_u == 0:
        raise ValueError("best_bin_alpha needs at least one positive and one unlabeled score")
    cuts = np.unique(unlabeled)
    above_u = n_u - np.searchsorted(unlabeled, cuts, side="left")
    above_p = n_p - np.searchsorted(positive, cuts, side="left")
    usable = (above_p >= 2) & (above_u >= 2)
    if not usable.any():
        return 1.0  # no cut separates anything: nothing says U holds negatives
    q_u, q_p = above_u[usable] / n_u, above_p[usable] / n_p
    ratio = q_u / q_p
    slack = np.sqrt(np.log(1.0 / delta) / (2 * n_u)) + np.sqrt(np.log(1.0 / delta) / (2 * n_p))
    best = int(np.argmin(ratio + (1.0 + gamma) / q_p * slack))
    return float(np.clip(ratio[best], 0.0, 1.0))


def mean_estimate(pool_positive: np.ndarray) -> float:
    """π̂ as the mean of P(y=0) over the pool: pulled towards 0.5 where the model is unsure."""
    return float(np.mean(1.0 - np.asarray(pool_positive, dtype=np.float64)))


def best_bin_estimate(folds: Folds) -> float:
    """π̂ as 1 − BBE's α̂ on each fold's scores, averaged over the folds. BBE's α̂ bounds the
    pool's positive share from above where the model's top scores are pure positives, so this
    bounds π from below, and falls short where they are not."""
    return float(np.mean([1.0 - best_bin_alpha(held, pool) for held, pool in folds]))


def class_prior_estimate(pool_positive: np.ndarray, folds: Folds | None) -> float:
    """The larger of :func:`mean_estimate` and :func:`best_bin_estimate` (each guards against
    the other's miss; docs/classifier_measurements.md measures both); the mean alone without
    ``folds`` or with fewer than ``MIN_LABELED_FOR_ESTIMATES`` held-out positives in them."""
    mean = mean_estimate(pool_positive)
    if folds is None or sum(len(held) for held, _ in folds) < MIN_LABELED_FOR_ESTIMATES:
        return mean
    return max(mean, best_bin_estimate(folds))


def prior_cut(pool_positive: np.ndarray, pi_hat: float) -> tuple[np.ndarray, float]:
    """The ``threshold="prior"`` labels: the round(π̂ n) pool rows of lowest P(y=1) are
    negative (0), the rest positive (1); and the cut for new rows, halfway between the highest
    negative's P(y=1) and the lowest positive's (±inf when all rows fall on one side)."""
    proba = np.asarray(pool_positive)  # its own dtype: the cut is compared with new rows' P
    n = len(proba)
    negatives = min(n, max(0, round(pi_hat * n)))
    order = np.argsort(proba, kind="stable")
    labels = np.ones(n, dtype=np.int64)
    labels[order[:negatives]] = 0
    ranked = proba[order]
    if negatives == 0:
        cut = -math.inf
    elif negatives == n:
        cut = math.inf
    else:
        cut = float(ranked[negatives - 1] + ranked[negatives]) / 2.0
    return labels, cut
