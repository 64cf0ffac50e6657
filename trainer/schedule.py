"""The learning-rate schedule (paper §5): per phase, linear warmup then polynomial decay.

Each phase (1 = the curriculum, 2 = the final-stage tail) has its own schedule that restarts
at the phase's first step. With ``u`` the 0-based step inside the phase, ``N`` the phase's
length in steps, ``W`` its warmup, ``peak``/``floor`` its learning rates and ``p`` its decay
power:

    lr(u) = peak * (u + 1) / W                                  for u <  W
    lr(u) = floor + (peak - floor) * (1 - (u - W) / (N - W))**p  for u >= W

so the first step already trains (``peak / W``), the last warmup step reaches ``peak``, and
the rate falls to ``floor`` at the phase's end (``u = N`` would be exactly ``floor``; the last
step, ``u = N - 1``, is a hair above it). When ``W >= N`` the phase is all warmup. The
function is stateless -- the rate of a step depends on nothing but the step -- which is what
makes a resumed run bit-identical to an uninterrupted one.
"""

from __future__ import annotations

from trainer.config import PhaseSchedule, TrainingConfig
from trainer.sampler import RunPlan


def phase_learning_rate(step_in_phase: int, phase_length: int, schedule: PhaseSchedule) -> float:
    """The learning rate of 0-based step ``step_in_phase`` of a phase ``phase_length`` long."""
    if step_in_phase < 0 or step_in_phase >= phase_length:
        raise ValueError(
            f"step {step_in_phase} is outside its phase of {phase_length} steps"
        )
    warmup = schedule.warmup_steps
    if step_in_phase < warmup:
        return schedule.peak_lr * (step_in_phase + 1) / warmup
    decay_steps = phase_length - warmup
    progress = (step_in_phase - warmup) / decay_steps
    remaining = (1.0 - progress) ** schedule.decay_power
    return schedule.floor_lr + (schedule.peak_lr - schedule.floor_lr) * remaining


def learning_rate(global_step: int, plan: RunPlan, training: TrainingConfig) -> float:
    """The learning rate of 0-based ``global_step`` of a run (phase 1 or 2 by position)."""
    phase, step_in_phase, length = plan.phase_position(global_step)
    schedule = training.phase1 if phase == 1 else training.phase2
    return phase_learning_rate(step_in_phase, length, schedule)
