"""The curriculum of paper §5: global training step <-> (phase, stage, step in stage).

Phase 1 runs stages 1..K of S steps each (global steps 0 .. K·S-1); phase 2, the "tail",
runs T steps (global steps K·S .. K·S+T-1) at the final stage's ranges. Steps are 0-based
within their stage; task ``i`` of a stage belongs to step ``i // global_batch``.
"""

from __future__ import annotations

from dataclasses import dataclass

from prior_gen.config import CurriculumConfig
from prior_gen.paper.seeding import TAIL, Stage

__all__ = [
    "StepAddress",
    "all_stages",
    "annealing_stage",
    "causal_probability",
    "first_global_step",
    "locate",
    "steps_in_stage",
]


@dataclass(frozen=True)
class StepAddress:
    """Where a global step lies: ``phase`` 1 or 2, ``stage`` 1..K or "tail", 0-based step."""

    phase: int
    stage: Stage
    step_in_stage: int


def _check_stage(stage: Stage, curriculum: CurriculumConfig) -> None:
    if stage == TAIL:
        if curriculum.tail_steps == 0:
            raise ValueError("this curriculum has no tail (curriculum.tail_steps is 0)")
        return
    if isinstance(stage, bool) or not isinstance(stage, int):
        raise ValueError(f"a stage is an integer 1..{curriculum.stages} or {TAIL!r}, got {stage!r}")
    if not 1 <= stage <= curriculum.stages:
        raise ValueError(f"stage {stage} is outside 1..{curriculum.stages}")


def steps_in_stage(stage: Stage, curriculum: CurriculumConfig) -> int:
    """S for a phase-1 stage, T for the tail."""
    _check_stage(stage, curriculum)
    return curriculum.tail_steps if stage == TAIL else curriculum.steps_per_stage


def all_stages(curriculum: CurriculumConfig) -> list[Stage]:
    """1..K, then "tail" if the curriculum has one."""
    stages: list[Stage] = list(range(1, curriculum.stages + 1))
    if curriculum.tail_steps > 0:
        stages.append(TAIL)
    return stages


def locate(global_step: int, curriculum: CurriculumConfig) -> StepAddress:
    """The (phase, stage, step in stage) of 0-based ``global_step``."""
    total = curriculum.total_steps
    if isinstance(global_step, bool) or not isinstance(global_step, int):
        raise ValueError(f"global step must be an integer, got {global_step!r}")
    if not 0 <= global_step < total:
        raise ValueError(
            f"global step {global_step} is outside 0..{total - 1} of the curriculum "
            f"({curriculum.stages} stages × {curriculum.steps_per_stage} steps + "
            f"{curriculum.tail_steps} tail steps)"
        )
    if global_step < curriculum.phase1_steps:
        stage, step = divmod(global_step, curriculum.steps_per_stage)
        return StepAddress(phase=1, stage=stage + 1, step_in_stage=step)
    return StepAddress(phase=2, stage=TAIL, step_in_stage=global_step - curriculum.phase1_steps)


def first_global_step(stage: Stage, curriculum: CurriculumConfig) -> int:
    """The inverse of :func:`locate` for step 0 of ``stage``."""
    _check_stage(stage, curriculum)
    if stage == TAIL:
        return curriculum.phase1_steps
    return (int(stage) - 1) * curriculum.steps_per_stage


def annealing_stage(stage: Stage, curriculum: CurriculumConfig) -> int:
    """The stage index whose ranges apply: the stage itself, or K for the tail."""
    _check_stage(stage, curriculum)
    return curriculum.stages if stage == TAIL else int(stage)


def causal_probability(stage: Stage, curriculum: CurriculumConfig) -> float:
    """P(causal) = causal_final · s / K (paper: s / (2K)); the tail uses s = K."""
    s = annealing_stage(stage, curriculum)
    return curriculum.causal_final * s / curriculum.stages
