"""Best Bin Estimation (BBE) of a mixture proportion: Garg, Wu, Smola, Balakrishnan & Lipton,
"Mixture Proportion Estimation and PU Learning: A Modern Approach" (NeurIPS 2021), Alg. 1.

Given scores of held-out positives and of an unlabeled sample under one score function
(higher = more positive-like), for a cut c let q_P(c) and q_U(c) be the shares of each sample
scoring at least c. Positives are a share α of U, so q_U(c) ≥ α q_P(c) for every c, with near
equality where only positives score above c (the "best bin"). The estimate is q_U(ĉ) / q_P(ĉ)
at the cut that minimizes that ratio plus a confidence slack:

    ĉ = argmin_c  q_U(c)/q_P(c) + (1+γ)/q_P(c) · ( √(log(1/δ)/(2 n_U)) + √(log(1/δ)/(2 n_P)) )

with the authors' δ = 0.1, γ = 0.01. A cut needs at least two rows of each sample above it.

:func:`class_prior_estimate` is the classifier's π̂ (``PUICLClassifier.estimate_class_prior``):
the larger of the pool's mean P(y=0) and BBE on the model's own scores, read off those scores
alone so that benchmarks/puicl_prior.py recomputes it from kept scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_LABELED_FOR_BBE", "best_bin_alpha", "best_bin_estimate", "class_prior_estimate",
           "mean_estimate", "prior_cut"]

# the fewest labeled positives whose split in halves BBE is run on
MIN_LABELED_FOR_BBE = 20

# per half of the labeled positives: (the held-out half's P(y=1), the pool's P(y=1)), both
# scored next to the other half
Halves = Sequence[tuple[np.ndarray, np.ndarray]]


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


def best_bin_estimate(halves: Halves) -> float:
    """π̂ as 1 − BBE's α̂ on each half's scores, averaged over the halves. BBE's α̂ bounds the
    pool's positive share from above where the model's top scores are pure positives, so this
    bounds π from below, and falls short where they are not."""
    return float(np.mean([1.0 - best_bin_alpha(held, pool) for held, pool in halves]))


def class_prior_estimate(pool_positive: np.ndarray, halves: Halves | None) -> float:
    """The larger of :func:`mean_estimate` and :func:`best_bin_estimate` (each guards against
    the other's miss; docs/classifier.md measures both); the mean alone without ``halves`` or
    with fewer than ``MIN_LABELED_FOR_BBE`` held-out positives in them."""
    mean = mean_estimate(pool_positive)
    if halves is None or sum(len(held) for held, _ in halves) < MIN_LABELED_FOR_BBE:
        return mean
    return max(mean, best_bin_estimate(halves))


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
