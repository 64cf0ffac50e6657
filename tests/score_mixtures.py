"""Synthetic score mixtures of known π, shared by the class-prior estimators' tests: scores of
held-out positives and of a pool whose negative share is π, from Beta laws that separate the
classes well, partly or not at all."""

from __future__ import annotations

import numpy as np

SEPARATED = ((8, 1), (1, 8))  # (positives' Beta, negatives' Beta)
OVERLAPPING = ((3, 2), (2, 3))
IDENTICAL = ((2, 2), (2, 2))


def mixture(pi: float, laws: tuple, seed: int, n_held: int = 200, n_pool: int = 1000,
            ) -> tuple[np.ndarray, np.ndarray]:
    """(held-out positives' scores, pool's scores) with a negative share π of the pool."""
    positive, negative = laws
    rng = np.random.default_rng(seed)
    n_pos = round((1.0 - pi) * n_pool)
    pool = np.r_[rng.beta(*positive, n_pos), rng.beta(*negative, n_pool - n_pos)]
    return rng.beta(*positive, n_held), pool


def errors(estimator, pi: float, laws: tuple, seeds: range = range(5)) -> np.ndarray:
    """π̂ − π per seed."""
    return np.array([1.0 - estimator(*mixture(pi, laws, seed)) - pi for seed in seeds])
