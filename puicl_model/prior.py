"""Estimators of π, the negative share of the unlabeled pool, from the model's scores.

Each reads the scores of one score function (the model's P(y=1), higher = more positive-like)
on held-out labeled positives and on the pool: the cross-fitted scores of
:mod:`puicl_model.class_prior`, one (held-out, pool) pair per fold. Positives are a share
α = 1 − π of the pool, so the pool's score density is f_U = α f_P + (1 − α) f_N.

* :func:`best_bin_alpha`: Best Bin Estimation (BBE), Garg, Wu, Smola, Balakrishnan & Lipton,
  "Mixture Proportion Estimation and PU Learning: A Modern Approach" (NeurIPS 2021), Alg. 1.
  For a cut c let q_P(c) and q_U(c) be the shares of each sample scoring at least c;
  q_U(c) ≥ α q_P(c) for every c, with near equality where only positives score above c (the
  "best bin"). The estimate is q_U(ĉ) / q_P(ĉ) at the cut that minimizes that ratio plus a
  confidence slack:

      ĉ = argmin_c  q_U(c)/q_P(c) + (1+γ)/q_P(c) · ( √(log(1/δ)/(2 n_U)) + √(log(1/δ)/(2 n_P)) )

  with the authors' δ = 0.1, γ = 0.01. A cut needs at least two rows of each sample above it.
* :func:`dedpul_alpha`: DEDPUL, Ivanov, "DEDPUL: Difference-of-Estimated-Densities-based
  Positive-Unlabeled Learning" (NeurIPS 2020): the densities of the two samples' scores,
  their ratio r = f_P / f_U at the pool's rows made monotone, and α from the posteriors
  α·r (see the function).
* :func:`mean_estimate`: the pool's mean P(y=0).

Both BBE and DEDPUL estimate α from the region where positives alone score (irreducibility):
where the classes' scores overlap everywhere they overestimate α, so π̂ falls short of π by
about the share of the pool's positives that no score separates from negatives.

:func:`class_prior_estimate` is the classifier's π̂ (``PUICLClassifier.estimate_class_prior``),
read off the scores alone so that benchmarks/puicl_prior.py recomputes it from kept scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_LABELED_FOR_ESTIMATES", "Folds", "best_bin_alpha", "best_bin_estimate",
           "class_prior_estimate", "dedpul_alpha", "dedpul_estimate", "mean_estimate",
           "prior_cut"]

# the fewest labeled positives whose split in folds the score-based estimators run on
MIN_LABELED_FOR_ESTIMATES = 20

# per fold of the labeled positives: (the held-out fold's P(y=1), the pool's P(y=1)), both
# scored by the same passes next to the other folds (puicl_model.class_prior)
Folds = Sequence[tuple[np.ndarray, np.ndarray]]

# DEDPUL: scores are compared on the logit scale, clipped to [ε, 1 − ε] (the model's
# probabilities saturate); the kernel's least width there; the grid the densities are
# evaluated on; and the largest density ratio kept (α ≥ 1/R)
_LOGIT_EPS = 1e-6
_MIN_BANDWIDTH = 0.1
_GRID = 512
_MAX_RATIO = 100.0
# DEDPUL: the most the posteriors' clipped mass may move α (see dedpul_alpha)
DEDPUL_TOLERANCE = 0.01

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


def _logit(scores: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(scores, dtype=np.float64), _LOGIT_EPS, 1.0 - _LOGIT_EPS)
    return np.log(p) - np.log1p(-p)


def _bandwidth(z: np.ndarray, n: int) -> float:
    """Silverman's rule of thumb for ``n`` rows of spread like ``z``'s, at least
    ``_MIN_BANDWIDTH`` (saturated scores have no spread)."""
    quartiles = np.subtract(*np.percentile(z, [75, 25]))
    spread = min(float(np.std(z)), quartiles / 1.34) or float(np.std(z))
    return max(0.9 * spread * n ** -0.2, _MIN_BANDWIDTH)


def _density(sample: np.ndarray, grid: np.ndarray, bandwidth: float) -> np.ndarray:
    """Gaussian kernel density of ``sample`` on ``grid`` (up to the kernel's constant)."""
    density = np.zeros(len(grid))
    for start in range(0, len(sample), 4096):  # [grid, 4096] blocks: memory stays small
        part = sample[start : start + 4096]
        density += np.exp(-0.5 * ((grid[:, None] - part[None, :]) / bandwidth) ** 2).sum(1)
    return density / len(sample)


def density_ratio(positive_scores: np.ndarray, unlabeled_scores: np.ndarray) -> np.ndarray:
    """DEDPUL's r = f_P / f_U at each unlabeled row, made non-decreasing in the score.

    Both densities are Gaussian kernel estimates of the logit scores with ONE bandwidth
    (Silverman's, for the smaller sample on the two samples' spread): smoothing both with the
    same kernel keeps f_U ≥ α f_P, so r ≤ 1/α still holds, with equality where only positives
    score (a bandwidth per sample would bias r by their ratio where the scores saturate).
    The paper smooths r and makes it monotone in the score (a higher score, the NTC's more
    positive-like prediction, never lowers the positives' share); we fit it by isotonic
    regression (equal weights, which keeps its mean over the pool), capped at ``_MAX_RATIO``.
    """
    from sklearn.isotonic import IsotonicRegression

    z_p, z_u = _logit(positive_scores), _logit(unlabeled_scores)
    both = np.concatenate([z_p, z_u])
    bandwidth = _bandwidth(both, min(len(z_p), len(z_u)))
    grid = np.linspace(both.min() - 3 * bandwidth, both.max() + 3 * bandwidth, _GRID)
    f_p, f_u = _density(z_p, grid, bandwidth), _density(z_u, grid, bandwidth)
    ratio = np.interp(z_u, grid, f_p / np.maximum(f_u, np.finfo(np.float64).tiny))
    ratio = np.minimum(ratio, _MAX_RATIO)
    return IsotonicRegression(increasing=True).fit_transform(z_u, ratio)


def dedpul_alpha(positive_scores: np.ndarray, unlabeled_scores: np.ndarray,
                 tolerance: float = DEDPUL_TOLERANCE) -> float:
    """α̂ in [0, 1] by DEDPUL (Ivanov, NeurIPS 2020) on one score function.

    The posterior of a pool row is P(+ | x) = α r(x) with r = f_P / f_U
    (:func:`density_ratio`); it is at most 1, and α is the pool's mean posterior. DEDPUL's EM
    step α ← mean_U min(1, α r) leaves the true α in place and lowers any larger α, whose
    posteriors exceed 1 somewhere; with estimated densities it keeps lowering it towards 0, so
    the paper stops where the step starts to move α. Here r is scaled to mean 1 over the pool
    (E_U[f_P/f_U] = 1) and α̂ is the largest α whose step lowers it by at most ``tolerance``:
    α − mean_U min(1, α r) ≤ tolerance. With no pure-positive region the posteriors of every α
    up to 1 stay below 1 and α̂ = 1: nothing tells the pool's positives from the labeled ones.
    """
    positive = np.asarray(positive_scores, dtype=np.float64)
    unlabeled = np.asarray(unlabeled_scores, dtype=np.float64)
    if len(positive) < 2 or len(unlabeled) < 2:
        raise ValueError("dedpul_alpha needs at least two positive and two unlabeled scores")
    ratio = density_ratio(positive, unlabeled)
    mean = float(ratio.mean())
    if mean <= 0.0:
        return 0.0  # no positive density anywhere in the pool
    ratio = np.sort(ratio / mean)
    prefix = np.concatenate([[0.0], np.cumsum(ratio)])
    alphas = np.linspace(0.0, 1.0, 1001)
    # mean_U min(1, α r): rows with α r < 1 count α r, the others 1
    below = np.searchsorted(ratio, 1.0 / np.maximum(alphas, 1e-12), side="left")
    step = (alphas * prefix[below] + (len(ratio) - below)) / len(ratio)
    within = np.flatnonzero(alphas - step <= tolerance)
    return float(alphas[within[-1]])


def mean_estimate(pool_positive: np.ndarray) -> float:
    """π̂ as the mean of P(y=0) over the pool: pulled towards 0.5 where the model is unsure."""
    return float(np.mean(1.0 - np.asarray(pool_positive, dtype=np.float64)))


def best_bin_estimate(folds: Folds) -> float:
    """π̂ as 1 − BBE's α̂ on each fold's scores, averaged over the folds. BBE's α̂ bounds the
    pool's positive share from above where the model's top scores are pure positives, so this
    bounds π from below, and falls short where they are not."""
    return float(np.mean([1.0 - best_bin_alpha(held, pool) for held, pool in folds]))


def dedpul_estimate(folds: Folds, tolerance: float = DEDPUL_TOLERANCE) -> float:
    """π̂ as 1 − DEDPUL's α̂ on each fold's scores, averaged over the folds (a lower bound of
    π where the classes' scores overlap, as BBE's)."""
    return float(np.mean([1.0 - dedpul_alpha(held, pool, tolerance) for held, pool in folds]))


def class_prior_estimate(pool_positive: np.ndarray, folds: Folds | None) -> float:
    """The larger of :func:`mean_estimate` and :func:`best_bin_estimate` (each guards against
    the other's miss; docs/classifier.md measures both); the mean alone without ``folds`` or
    with fewer than ``MIN_LABELED_FOR_ESTIMATES`` held-out positives in them."""
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
