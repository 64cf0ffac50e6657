"""Best Bin Estimation (BBE) of the mixture proportion, Garg et al. (NeurIPS 2021), Alg. 1.

Given held-out positives and unlabeled rows scored by a P-vs-U classifier f (higher =
more positive-like), for a threshold c let q_P(c) = share of positives with f ≥ c and
q_U(c) = share of unlabeled rows with f ≥ c. The estimate of α (the positive share of U) is
q_U(ĉ) / q_P(ĉ) at

    ĉ = argmin_c  q_U(c)/q_P(c) + (1+γ)/q_P(c) · ( √(log(1/δ)/(2 n_U)) + √(log(1/δ)/(2 n_P)) ),

with the authors' δ = 0.1, γ = 0.01. As in the authors' code, a threshold needs at least two
rows of each sample above it. The estimate is clipped to [0, 1].
"""

from __future__ import annotations

import numpy as np


def bbe_alpha(
    positive_scores: np.ndarray,
    unlabeled_scores: np.ndarray,
    delta: float = 0.1,
    gamma: float = 0.01,
) -> float:
    """BBE estimate of α = share of positives in the unlabeled sample."""
    p = np.sort(np.asarray(positive_scores, dtype=np.float64))
    u = np.sort(np.asarray(unlabeled_scores, dtype=np.float64))
    n_p, n_u = len(p), len(u)
    if n_p == 0 or n_u == 0:
        raise ValueError("BBE needs at least one positive and one unlabeled score")
    thresholds = np.unique(u)
    count_u = n_u - np.searchsorted(u, thresholds, side="left")  # rows with score ≥ c
    count_p = n_p - np.searchsorted(p, thresholds, side="left")
    valid = (count_p >= 2) & (count_u >= 2)
    if not valid.any():
        return 1.0  # no threshold separates anything: U looks all positive
    q_u = count_u[valid] / n_u
    q_p = count_p[valid] / n_p
    ratio = q_u / q_p
    slack = np.sqrt(np.log(1 / delta) / (2 * n_u)) + np.sqrt(np.log(1 / delta) / (2 * n_p))
    upper = ratio + (1 + gamma) / q_p * slack
    return float(np.clip(ratio[int(np.argmin(upper))], 0.0, 1.0))
