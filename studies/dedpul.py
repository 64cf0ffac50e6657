"""DEDPUL (Ivanov, "DEDPUL: Difference-of-Estimated-Densities-based Positive-Unlabeled
Learning", NeurIPS 2020), one of the class-prior estimators the class-prior study
(:mod:`studies.puicl_prior`) compares with the classifier's rule; the classifier does not use it
(docs/classifier_measurements.md measures it).

It reads the same cross-fitted scores as :mod:`puicl_model.estimator.prior`'s estimators: the
densities of the held-out positives' and the pool's scores, their ratio r = f_P / f_U at the pool's
rows made monotone, and α (the pool's positive share) from the posteriors α·r. Like BBE it
estimates α from the region where positives alone score, so where the classes' scores overlap
everywhere π̂ = 1 − α̂ falls short of π.
"""

from __future__ import annotations

import numpy as np

from puicl_model.estimator.prior import Folds

__all__ = ["DEDPUL_TOLERANCE", "dedpul_alpha", "dedpul_estimate", "density_ratio"]

# scores are compared on the logit scale, clipped to [ε, 1 − ε] (the model's probabilities
# saturate); the kernel's least width there; the grid the densities are evaluated on; and the
# largest density ratio kept (α ≥ 1/R)
_LOGIT_EPS = 1e-6
_MIN_BANDWIDTH = 0.1
_GRID = 512
_MAX_RATIO = 100.0
# the most the posteriors' clipped mass may move α (see dedpul_alpha)
DEDPUL_TOLERANCE = 0.01


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


def dedpul_estimate(folds: Folds, tolerance: float = DEDPUL_TOLERANCE) -> float:
    """π̂ as 1 − DEDPUL's α̂ on each fold's scores, averaged over the folds (a lower bound of
    π where the classes' scores overlap, as BBE's)."""
    return float(np.mean([1.0 - dedpul_alpha(held, pool, tolerance) for held, pool in folds]))
