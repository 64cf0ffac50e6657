"""Noisy labels (``prior.label_noise``): outcomes that the features do not fully decide.

The paper labels a task by the rank of its SCM's score: the ⌈π·n⌉ highest scores are the
negatives (§2.2). The SCM's own noise (σ_noise ≤ 0.02 beside hidden values of several units)
leaves that label almost a function of the SCM's inputs, while the outcomes of real tables
also depend on what was never measured. With probability ``probability`` per task (first draw
of the task's ``label_noise`` stream, ``prior_gen.seeding.task_stream``), the rank is instead
taken of

    s̃ = s + τ·ε,   ε ~ N(0, 1) per row (the quantile table),   τ ~ U(scale),

where s is the standardized, clipped score (unit variance), so τ is the noise's share of the
score's spread: τ = 1 gives corr(s, s̃) = 1/√2. The features, π, P, η and the PU split are as
without the option; only which rows are positive changes. Tasks labeled by a rule
(``prior.label_rule``) are not affected. The metadata's ``label_noise`` records τ, 0.0 for
the tasks left clean.

Portable (the same bytes on every CPU): ε comes from the quantile table, and the sum is one
elementwise float64 operation.
"""

from __future__ import annotations

import numpy as np

from prior_gen.factors import TaskPlan
from prior_gen.families.base import normals
from prior_gen.mechanisms_config import LabelNoiseConfig
from prior_gen.pu import ScoreNoise
from prior_gen.seeding import task_stream

__all__ = ["score_noise"]


def score_noise(plan: TaskPlan, spec: LabelNoiseConfig) -> ScoreNoise | None:
    """For ``prior_gen.pu.build_task``: the noise of a noisy task's score, None for a clean one.

    Every call starts the task's label_noise stream afresh, so a redrawn SCM's task draws its
    τ and ε in the same way."""
    if not float(task_stream(plan.seed_key, "label_noise").random()) < spec.probability:
        return None

    def noisy(score: np.ndarray) -> tuple[np.ndarray, float]:
        rng = task_stream(plan.seed_key, "label_noise")
        rng.random()  # the draw that made this a noisy task
        lo, hi = spec.scale
        tau = lo + float(rng.random()) * (hi - lo)
        epsilon = normals(rng, score.shape[0]).astype(np.float64)
        return score.astype(np.float64) + tau * epsilon, tau

    return noisy
