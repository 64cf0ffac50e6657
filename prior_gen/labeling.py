"""Biased labeled positives (``prior.labeling``): selection bias in the PU split.

The paper's split labels the first P positives of a uniform permutation (§2.3): SCAR, every
positive is equally likely to be labeled. Real labels are often biased by the features (the
noticed, diagnosed or reported cases; SAR, Bekker, Robberechts & Davis, arXiv 1809.03207).
With probability ``probability`` per task (first draw of the task's ``labeling`` stream,
``prior_gen.seeding.task_stream``), the P labeled positives are instead drawn without
replacement with probabilities ∝ the propensity

    e(x) = 1 / (1 + E(−k·z(x))),   z = (w·x − mean) / std over the task's positives,

where x is the row's standardized, clipped features (before ``prior.dataset.columns`` and
``categorical`` change them), w ~ N(0, I_d) (the quantile table), the slope k ~ U(strength),
and E the ≈exp of ``prior_gen.columns`` ((1 + y/64)^64). The draw is an exponential race:
row i gets the key −ln(U_i)/e_i, U_i uniform, and the P positives with the smallest keys are
labeled; that is exactly drawing one positive at a time ∝ e among those left. Everything else
of the split is unchanged: the dropped negatives, the pool (the other positives and
negatives, in permutation order), P, η and π. The metadata's ``labeling`` records
``{"mechanism": "sar", "slope": k, "direction": w}``, or ``{"mechanism": "scar"}`` for the
other tasks of such a config.

Portable (the same bytes on every CPU): the projection is summed column by column in float64,
the mean and std are ``math.fsum`` sums (correctly rounded), E is + and × only, and ln is our
own: frexp (exact) and the series of atanh, + − × ÷ only; numpy's exp and log, whose last bits
depend on its SIMD kernels, are not used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from prior_gen.columns import pseudo_exp
from prior_gen.factors import TaskPlan
from prior_gen.families.base import normals
from prior_gen.mechanisms_config import LabelingConfig
from prior_gen.seeding import task_stream

__all__ = ["labeling_keys", "portable_log", "propensities", "race_keys"]

_STD_FLOOR = 1e-6
_LN2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
# 1 / (2i + 1): ln m = 2·Σ t^(2i+1) / (2i + 1) with t = (m − 1) / (m + 1), |t| ≤ 0.172, so
# eleven terms leave a remainder below 1e-17 relative
_ATANH = tuple(1.0 / (2 * i + 1) for i in range(11))

# race keys of the n rows, from the standardized features and the int8 labels of all of them
Keys = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, dict[str, Any]]]


def portable_log(u: np.ndarray) -> np.ndarray:
    """float64 ln(u) for float64 u > 0, from IEEE-exact operations only (module docstring)."""
    mantissa, exponent = np.frexp(np.asarray(u, np.float64))  # u = m·2^e, m in [0.5, 1)
    low = mantissa < _SQRT_HALF  # m in [√½, √2) keeps |t| small
    mantissa = np.where(low, mantissa * 2.0, mantissa)
    exponent = np.where(low, exponent - 1, exponent)
    t = (mantissa - 1.0) / (mantissa + 1.0)
    t2 = t * t
    series = np.full_like(t, _ATANH[-1])
    for coefficient in _ATANH[-2::-1]:
        series = series * t2 + coefficient
    return exponent.astype(np.float64) * _LN2 + 2.0 * t * series


def propensities(x: np.ndarray, positive: np.ndarray, direction: np.ndarray,
                 slope: float) -> np.ndarray:
    """float64 e(x) > 0 of every row of ``x`` [n, d] (float32), z standardized over the rows
    where ``positive`` holds."""
    projection = np.zeros(x.shape[0], np.float64)
    for j in range(x.shape[1]):  # fixed order, no BLAS
        projection += float(direction[j]) * x[:, j].astype(np.float64)
    among = projection[positive]
    mean = math.fsum(among.tolist()) / among.shape[0]
    deviation = among - mean
    variance = math.fsum((deviation * deviation).tolist()) / among.shape[0]
    z = (projection - mean) / max(math.sqrt(variance), _STD_FLOOR)
    return 1.0 / (1.0 + pseudo_exp(-slope * z))


def race_keys(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """−ln(1 − U)/e: the rows with the k smallest keys are a draw of k without replacement
    ∝ ``weights`` (``uniforms`` in [0, 1), so 1 − U is never 0)."""
    return -portable_log(1.0 - uniforms) / weights


def labeling_keys(plan: TaskPlan, spec: LabelingConfig) -> Keys | None:
    """For ``prior_gen.pu.build_task``: the race keys of a biased task, None for a SCAR one.

    Every call starts the task's labeling stream afresh, so a redrawn SCM's task draws its
    direction, slope and uniforms in the same way."""
    if not float(task_stream(plan.seed_key, "labeling").random()) < spec.probability:
        return None

    def keys(x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        rng = task_stream(plan.seed_key, "labeling")
        rng.random()  # the draw that made this a biased task
        lo, hi = spec.strength
        slope = lo + float(rng.random()) * (hi - lo)
        direction = normals(rng, x.shape[1])
        weights = propensities(x, labels.view(bool), direction, slope)
        record = {"mechanism": "sar", "slope": slope,
                  "direction": [float(v) for v in direction]}  # fmt: skip
        return race_keys(weights, rng.random(x.shape[0])), {"labeling": record}

    return keys
