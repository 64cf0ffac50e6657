"""What the scores say about π, the negative share of the unlabeled pool: a bound, a point, an
interval and a flag (``PUICLClassifier.class_prior_report``).

From positive-unlabeled data alone π is not identified where the classes overlap: the pool's
score law f_U = α f_P + (1 − α) f_N with α = 1 − π fits every α up to the largest one that keeps
the negatives' part f_U − α f_P non-negative, so the data identify only a LOWER bound on π
(Blanchard, Lee & Scott, "Semi-supervised novelty detection", JMLR 11, 2010). Three figures:

* :func:`negative_share_bound`: that bound, read off the cross-fitted scores with a
  finite-sample margin so that it holds with probability about 1 − 2δ (BBE's cut ratio, Garg
  et al., NeurIPS 2021, with a Dvoretzky–Kiefer–Wolfowitz margin on each sample's share);
* the point π̂ (:func:`puicl_model.estimator.prior.class_prior_estimate`), which also rests on the
  model's own probabilities: the mean of P(y=0) over the pool, which is right only where the
  model's P(y=1) is calibrated on this table (in practice it leans on the prior the model was
  trained on, docs/recipe.md);
* :func:`bootstrap_estimates`: the point recomputed on resampled pool rows and held-out
  positives, from the scores already computed (no pass of the model per replicate).

:func:`prior_report` combines them with the flag :data:`POORLY_IDENTIFIED_GAP`, and says π is
*not identified* where the bound is near 0 (:data:`NEAR_ZERO_BOUND`) and the held-out positives
are told from the pool no better than chance (:func:`held_out_auc` within :data:`SIGNAL_Z`
standard errors of ½): a table without signal (constant or repeated rows, noise columns, a
one-row pool), where π̂ is the model's prior and not read from the table.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.stats import rankdata

from puicl_model.estimator.prior import (
    MIN_LABELED_FOR_ESTIMATES,
    Folds,
    class_prior_estimate,
)
from puicl_model.passes import seed_keys

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_DELTA",
    "DEFAULT_LEVEL",
    "MODEL_ERROR_ALLOWANCE",
    "NEAR_ZERO_BOUND",
    "POORLY_IDENTIFIED_GAP",
    "SHARE_SLACK",
    "SIGNAL_Z",
    "UNPLACED_MARK",
    "ClassPriorReport",
    "ThresholdWarning",
    "bootstrap_estimates",
    "crowds_the_cut",
    "held_out_auc",
    "negative_share_bound",
    "prior_report",
    "threshold_note",
]

DEFAULT_LEVEL = 0.9
DEFAULT_BOOTSTRAP = 400
# the bound's failure probability per sample (pool, held-out positives): both DKW margins hold
# at once with probability >= 1 − 2δ
DEFAULT_DELTA = 0.025
# the upper end's allowance for the point's own error, beyond its sampling noise: π̂ leans on the
# model's prior and rises about half as fast as π (docs/recipe.md), so π exceeded the
# bootstrap's upper end by up to this much on 94 % of the development suite's tasks (40 tables
# x 2 repetitions x π = 0.2 / 0.5 / 0.8; measured by studies/class_prior_interval.py)
MODEL_ERROR_ALLOWANCE = 0.2
# the flag: π is poorly identified when the point sits this far above the bound, or its
# interval is this wide: a threshold="prior" cut anywhere in that range labels this share of
# the pool differently. At 0.2, π̂ was within 0.1 of π on only 72 % of the tasks it called
# identified (the development suite's and the generated tables'); "identified" is said where
# the point all but meets the bound the data identify (docs/decisions.md, "What the
# class-prior report states")
POORLY_IDENTIFIED_GAP = 0.1
# π is not identified where the bound is below this and the ranking carries no signal: the
# data then say nothing about π, and π̂ (the pool's mean P(y=0) at best) is the model's prior
NEAR_ZERO_BOUND = 0.05
# the ranking carries no signal where the held-out positives' AUC against the pool is within
# this many standard errors (Mann-Whitney's, under no difference) of ½: under SCAR that AUC is
# ½ + π·(AUC of positives against negatives − ½), so a table that ranks at chance shows ½
SIGNAL_Z = 3.0
# a cut needs this many held-out positives above it (the ratio of two near-empty shares is noise)
_MIN_ABOVE = 2


@dataclasses.dataclass(frozen=True)
class ClassPriorReport:
    """π, the negative share of the fitted pool, as far as the scores identify it.

    Always ``interval[0] <= estimate <= interval[1] <= upper`` and ``lower_bound <= upper``;
    the point is flagged where it falls below the bound (the model's calibration contradicts
    the data there). ``lower_bound`` is None below ``MIN_LABELED_FOR_ESTIMATES`` labeled
    positives (no cross-fitted scores to bound π with). ``status`` says it in words:
    "identified", "poorly identified", "not identified" (no signal, a bound near 0: ``upper``
    is then 1, π may be anything the bound allows) or "not bounded".
    """

    lower_bound: float | None  # identified: π >= this with probability >= 1 − 2·delta
    estimate: float  # the point π̂ = estimate_class_prior(); rests on the model's calibration
    interval: tuple[float, float]  # the point's bootstrap interval at ``level``: sampling only
    upper: float  # read π in [lower_bound, upper]: interval[1] + allowance, at most 1
    allowance: float  # the model's error the upper end allows for (docs/classifier.md)
    level: float
    n_bootstrap: int
    delta: float
    poorly_identified: bool  # any status but "identified"
    note: str  # one line: what the figures mean for the threshold
    status: str  # "identified", "poorly identified", "not identified" or "not bounded"
    # the held-out positives' AUC against the pool (mean over folds; None without folds)
    held_out_auc: float | None

    def to_dict(self) -> dict:
        """The report as JSON-ready values."""
        data = dataclasses.asdict(self)
        data["interval"] = list(self.interval)
        return data


def _margin(n: int, delta: float) -> float:
    """DKW (Massart's constant): an empirical share of n rows falls short of its expectation
    by more than this at some cut with probability at most δ."""
    return math.sqrt(math.log(1.0 / delta) / (2.0 * n))


def negative_share_bound(folds: Folds, n_pool: int, delta: float = DEFAULT_DELTA) -> float:
    """π_low: with probability about ``1 − 2 delta``, π >= π_low (irreducible classes: = π).

    For every cut t on P(y=1), the pool's share above t is at least α times the positives'
    share above it, so α <= min_t q_U(t) / q_P(t); the shares are estimated, so each gets the
    DKW margin that holds at every cut at once: α <= min_t (q̂_U(t) + ε_U) / (q̂_P(t) − ε_P).
    The folds' samples are pooled (the mixture of the folds' score functions keeps the
    inequality); the pool's margin uses its own row count, not the folds' sum (the folds
    score the same rows).
    """
    held = np.sort(np.concatenate([np.asarray(h, dtype=np.float64) for h, _ in folds]))
    pool = np.sort(np.concatenate([np.asarray(u, dtype=np.float64) for _, u in folds]))
    if len(held) == 0 or len(pool) == 0:
        raise ValueError("negative_share_bound needs held-out positive and pool scores")
    if not 0.0 < delta < 0.5:
        raise ValueError(f"delta must be in (0, 0.5), got {delta!r}")
    eps_u, eps_p = _margin(n_pool, delta), _margin(len(held), delta)
    cuts = np.unique(held)
    q_p = (len(held) - np.searchsorted(held, cuts, side="left")) / len(held)
    q_u = (len(pool) - np.searchsorted(pool, cuts, side="left")) / len(pool)
    usable = (q_p - eps_p > 0) & (q_p * len(held) >= _MIN_ABOVE)
    if not usable.any():
        return 0.0  # too few positives to bound α below 1
    alpha_high = np.min((q_u[usable] + eps_u) / (q_p[usable] - eps_p))
    return float(1.0 - min(1.0, alpha_high))


def _weighted_best_bin(held: np.ndarray, pool: np.ndarray, w_held: np.ndarray,
                       w_pool: np.ndarray, delta: float = 0.1, gamma: float = 0.01) -> np.ndarray:
    """:func:`puicl_model.estimator.prior.best_bin_alpha` of each bootstrap replicate at once.

    A replicate is a count per row (``w_held`` [B, n_P], ``w_pool`` [B, n_U]); its rows are
    the original rows repeated, so its cuts are among the original pool's and a cut absent
    from it counts what the next present one does: the minimum over the original cuts is the
    replicate's own.
    """
    order_p, order_u = np.argsort(held, kind="stable"), np.argsort(pool, kind="stable")
    positive, unlabeled = held[order_p], pool[order_u]
    n_p, n_u = len(held), len(pool)
    # rows at or above each sorted position, per replicate (reverse cumulative counts)
    tail_p = np.cumsum(w_held[:, order_p][:, ::-1], axis=1)[:, ::-1]
    tail_u = np.cumsum(w_pool[:, order_u][:, ::-1], axis=1)[:, ::-1]
    tail_p = np.concatenate([tail_p, np.zeros((len(tail_p), 1))], axis=1)
    tail_u = np.concatenate([tail_u, np.zeros((len(tail_u), 1))], axis=1)
    cuts = np.unique(unlabeled)
    above_p = tail_p[:, np.searchsorted(positive, cuts, side="left")]
    above_u = tail_u[:, np.searchsorted(unlabeled, cuts, side="left")]
    usable = (above_p >= 2) & (above_u >= 2)
    q_u, q_p = above_u / n_u, np.where(usable, above_p / n_p, 1.0)
    ratio = q_u / q_p
    slack = np.sqrt(np.log(1.0 / delta) / (2 * n_u)) + np.sqrt(np.log(1.0 / delta) / (2 * n_p))
    objective = np.where(usable, ratio + (1.0 + gamma) / q_p * slack, np.inf)
    best = np.argmin(objective, axis=1)
    alpha = np.clip(ratio[np.arange(len(ratio)), best], 0.0, 1.0)
    return np.where(usable.any(axis=1), alpha, 1.0)


def _counts(rng: np.random.Generator, n: int, n_bootstrap: int) -> np.ndarray:
    """How often each of n rows is drawn in each of ``n_bootstrap`` resamples of n rows."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_bootstrap).astype(np.float64)


def bootstrap_estimates(pool_positive: np.ndarray, folds: Folds | None, entropy: int,
                        n_bootstrap: int = DEFAULT_BOOTSTRAP) -> np.ndarray:
    """π̂ (:func:`puicl_model.estimator.prior.class_prior_estimate`) of ``n_bootstrap`` resamples of
    the
    pool's rows and of each fold's held-out positives, from the scores already computed.

    A pool row keeps its scores in every scoring (the pool's own and each fold's), so the rows
    are drawn once for all; each fold's positives are drawn on their own. The draws are keyed
    ``(seed_keys.BOOTSTRAP, 0)`` for the pool's rows and ``(seed_keys.BOOTSTRAP, 1, K, k)`` for the
    positives of fold k of K.
    """
    pool_positive = np.asarray(pool_positive, dtype=np.float64)
    n_u = len(pool_positive)
    pool_key = (seed_keys.BOOTSTRAP, 0)
    rows = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=pool_key))
    w_pool = _counts(rows, n_u, n_bootstrap)
    mean = 1.0 - (w_pool @ pool_positive) / n_u
    if folds is None or sum(len(held) for held, _ in folds) < MIN_LABELED_FOR_ESTIMATES:
        return mean  # the rule's mean alone (class_prior_estimate)
    best_bin = np.zeros(n_bootstrap)
    for k, (held, pool) in enumerate(folds):
        key = (seed_keys.BOOTSTRAP, 1, len(folds), k)
        draws = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))
        w_held = _counts(draws, len(held), n_bootstrap)
        # a fold scored against a sample of the pool (a table's held-out positives): its own
        # rows drawn, after its positives, from the same stream
        w_fold_pool = w_pool if len(pool) == n_u else _counts(draws, len(pool), n_bootstrap)
        best_bin += 1.0 - _weighted_best_bin(np.asarray(held, dtype=np.float64),
                                             np.asarray(pool, dtype=np.float64),
                                             w_held, w_fold_pool)
    return np.maximum(mean, best_bin / len(folds))


def held_out_auc(folds: Folds) -> float:
    """The held-out positives' AUC against the pool's scores (ties ½), mean over the folds:
    ½ where the scores tell positives from the pool no better than chance."""
    aucs = []
    for held, pool in folds:
        held, pool = np.asarray(held, dtype=np.float64), np.asarray(pool, dtype=np.float64)
        ranks = rankdata(np.r_[held, pool])[:len(held)]
        aucs.append((ranks.sum() - len(held) * (len(held) + 1) / 2) / (len(held) * len(pool)))
    return float(np.mean(aucs))


def _carries_no_signal(auc: float, n_held: int, n_pool: int) -> bool:
    """Whether ``auc`` of ``n_held`` positives against ``n_pool`` rows is within
    :data:`SIGNAL_Z` standard errors of ½ (Mann-Whitney's variance under no difference; ties
    only lower it)."""
    se = math.sqrt((n_held + n_pool + 1) / (12.0 * n_held * n_pool))
    return auc - 0.5 <= SIGNAL_Z * se


def _note(bound: float | None, estimate: float, upper: float, poorly: bool,
          auc: float | None = None) -> str:
    """The one line a user reads: what the figures mean for the decision threshold (``auc``:
    the held-out AUC of a table whose ranking carries no signal, else None)."""
    if auc is not None:
        assert bound is not None
        return (f"π is not identified: the scores tell held-out labeled positives from the "
                f"pool no better than chance (AUC {auc:.2f}) and the data say only π >= "
                f"{bound:.2f}, so π̂ = {estimate:.2f} is the model's prior, not read from this "
                f"table, and π may be anywhere up to 1; keep the 0.5 cut unless you know π")
    if bound is None:
        return (f"π is not bounded (fewer than {MIN_LABELED_FOR_ESTIMATES} labeled positives): "
                f"π̂ = {estimate:.2f} is the model's mean P(y=0); keep the 0.5 cut unless you "
                f"know π")
    if poorly:
        return (f"π is poorly identified: the data say only π >= {bound:.2f}, π̂ = "
                f"{estimate:.2f} rests on the model's calibration and π may lie anywhere up to "
                f"{upper:.2f}, so threshold='prior' may label a share of the pool negative "
                f"that is far off; keep the 0.5 cut unless you know π")
    # the gap is a figure, not a pass mark: it is said as the distance it is
    return (f"π is identified: π̂ = {estimate:.2f} lies {estimate - bound:.2f} above the "
            f"identified lower bound {bound:.2f}; threshold='prior' labels that share of the "
            f"pool negative")


def prior_report(pool_positive: np.ndarray, folds: Folds | None, entropy: int,
                 level: float = DEFAULT_LEVEL, n_bootstrap: int = DEFAULT_BOOTSTRAP,
                 delta: float = DEFAULT_DELTA) -> ClassPriorReport:
    """The bound, the point, its interval and the flag from the scores already computed:
    the pool's P(y=1) (the pool's own scoring) and the cross-fitted ``folds`` (None, or fewer
    than ``MIN_LABELED_FOR_ESTIMATES`` held-out positives: no bound, the mean alone)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) \
            or n_bootstrap < 10:
        raise ValueError(f"n_bootstrap must be an integer >= 10, got {n_bootstrap!r}")
    if not 0.0 < delta < 0.5:
        raise ValueError(f"delta must be in (0, 0.5), got {delta!r}")
    if folds is not None and sum(len(held) for held, _ in folds) < MIN_LABELED_FOR_ESTIMATES:
        folds = None  # as class_prior_estimate: too few positives to read the scores
    estimate = class_prior_estimate(pool_positive, folds)
    replicates = bootstrap_estimates(pool_positive, folds, entropy, n_bootstrap)
    low, high = np.quantile(replicates, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    # the percentile interval of a max of estimates need not hold the point: widen it to
    interval = (min(float(low), estimate), max(float(high), estimate))
    bound = auc = None
    if folds is not None:
        # (the folds score the same pool rows: the pool's own, or a sample of them)
        bound = negative_share_bound(folds, min(len(pool_positive), len(folds[0][1])), delta)
        auc = held_out_auc(folds)
    upper = min(1.0, max(interval[1] + MODEL_ERROR_ALLOWANCE, bound or 0.0))
    # a point below the bound contradicts the data (the model's calibration is off): flagged
    poorly = (bound is None or not 0.0 <= estimate - bound <= POORLY_IDENTIFIED_GAP
              or interval[1] - interval[0] > POORLY_IDENTIFIED_GAP)
    # a bound near 0 with a ranking at chance: nothing about π is read from the table, and a
    # small π̂ above a zero bound would otherwise pass as identified
    absent = (bound is not None and auc is not None and bound < NEAR_ZERO_BOUND
              and _carries_no_signal(auc, sum(len(held) for held, _ in folds or ()),
                                     len(pool_positive)))
    if absent:
        upper, poorly = 1.0, True
    status = ("not bounded" if bound is None else "not identified" if absent
              else "poorly identified" if poorly else "identified")
    return ClassPriorReport(lower_bound=bound, estimate=estimate, interval=interval,
                            upper=upper, allowance=MODEL_ERROR_ALLOWANCE, level=level,
                            n_bootstrap=int(n_bootstrap), delta=delta,
                            poorly_identified=poorly,
                            note=_note(bound, estimate, upper, poorly, auc if absent else None),
                            status=status, held_out_auc=auc)


# ------------------------------------------------------------------------- the threshold
class ThresholdWarning(UserWarning):
    """``predict``'s cut labels a share of the pool negative that the data contradict."""


# how far the share a cut labels negative may stray from what the data say before it is said
SHARE_SLACK = 0.10
# the words that mark the last check's line (:func:`_unplaced_note`), for those who count them
UNPLACED_MARK = "as the probabilities expect, but π is"


def crowds_the_cut(negative: float, expected: float) -> bool:
    """Whether a cut that labels the share ``negative`` of a pool negative strays more than
    :data:`SHARE_SLACK` from ``expected``, the share the probabilities themselves expect (their
    mean P(y = 0)): they then crowd the cut (:func:`threshold_note`'s last check)."""
    return abs(negative - expected) > SHARE_SLACK


def threshold_note(pool_positive: np.ndarray, threshold: float, bound: float | None,
                   report: ClassPriorReport | None = None) -> str | None:
    """One line where the cut ``threshold`` on the pool's P(y = 1) labels a share of the pool
    negative that the data contradict, else None: a share more than :data:`SHARE_SLACK` below
    ``bound`` (π >= bound holds with probability about 95 %), above ``report``'s upper end, or
    more than :data:`SHARE_SLACK` from ``report``'s π̂: where π is identified, the cut is off;
    where it is not, neither the cut nor π̂ can place the labels, and the line says so. Last,
    with or without a ``report``: a share more than :data:`SHARE_SLACK` from the pool's mean
    P(y = 0), the share the probabilities themselves expect. They then crowd the cut (a wide
    table's scores all between 0.43 and 0.70, say), and which side of it a row falls says
    little; this needs nothing beyond the pool's probabilities, so it is checked where nothing
    bounds π too. Where all three agree but ``report`` finds π not identified, its range may
    still reach far past the cut's share: the line then says the share is unplaced
    (:func:`_unplaced_note`)."""
    pool_positive = np.asarray(pool_positive)
    negative = float(np.mean(pool_positive <= threshold))
    if report is not None and negative > report.upper:
        return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative, "
                f"above the {report.upper:.0%} that π̂ and its allowance for error reach here: "
                f"the probabilities are off on this table, so the labels are too; rank by "
                f"predict_proba, or cut with threshold='prior' (class_prior_report() says how "
                f"far π is identified)")
    if bound is not None and negative < bound - SHARE_SLACK:
        return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative, but "
                f"the data identify at least {bound:.0%} of it as negative: the probabilities "
                f"are off on this table, so the labels are too; rank by predict_proba, or cut "
                f"with threshold='prior' (class_prior_report() says how far π is identified)")
    if (report is not None and report.status == "identified"
            and abs(negative - report.estimate) > SHARE_SLACK):
        return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative, but "
                f"π is identified at {report.estimate:.0%} here: the probabilities are off on "
                f"this table, so the labels are too; threshold='prior' labels π̂ of it negative")
    if report is not None and abs(negative - report.estimate) > SHARE_SLACK:
        low = 0.0 if report.lower_bound is None else report.lower_bound
        return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative and "
                f"π̂ is {report.estimate:.0%}, but the data place π only between {low:.0%} and "
                f"{report.upper:.0%} here ({report.status}): neither can place the labels; "
                f"rank by predict_proba (class_prior_report() says why)")
    expected = float(np.mean(1.0 - pool_positive))
    if crowds_the_cut(negative, expected):
        return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative, but "
                f"the probabilities themselves expect {expected:.0%} (their mean P(y=0)): "
                f"they crowd the cut, so its labels are weak; rank by predict_proba, or cut "
                f"with threshold='prior' (class_prior_report() says how far π is identified)")
    if report is None:
        # nothing at hand bounds π from above: π̂ would be this same mean, and the report's
        # upper end its interval plus the allowance for the model's error
        low = 0.0 if bound is None else bound
        upper = min(1.0, expected + MODEL_ERROR_ALLOWANCE)
        return _unplaced_note(negative, threshold, low, upper, "not identified by what fit read")
    if report.status != "identified":
        low = 0.0 if report.lower_bound is None else report.lower_bound
        return _unplaced_note(negative, threshold, low, report.upper, report.status)
    return None


def _unplaced_note(negative: float, threshold: float, low: float, upper: float,
                   status: str) -> str | None:
    """The last check: the cut agrees with the probabilities' mean (and with π̂, where a report
    is at hand), but π is not identified, and the range [``low``, ``upper``] the data and the
    model's allowance for error leave it reaches more than :data:`SHARE_SLACK` past the cut's
    share on one side. All of them then rest on the model's calibration, and the share is
    unplaced rather than contradicted: on the generated tables π lay inside the range named on
    44 of the 46 lines (docs/user_tables.md, "Labels and the class prior")."""
    reach = max(negative - low, upper - negative)
    if reach <= SHARE_SLACK:
        return None
    return (f"the cut {threshold:g} labels {negative:.0%} of the fitted pool negative, "
            f"{UNPLACED_MARK} {status} here: the data and the model's margin "
            f"for error place it only between {low:.0%} and {upper:.0%}, so that share may be "
            f"off by up to {reach:.0%}; rank by predict_proba (class_prior_report() says how "
            f"far π is identified)")
