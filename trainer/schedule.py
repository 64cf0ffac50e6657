"""The learning-rate schedules: paper §5's ``warmup_power`` (the default) and ``wsd``.

``warmup_power`` -- per phase, linear warmup then polynomial decay.

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

``wsd`` -- warmup-stable-decay (Hu et al., MiniCPM, arXiv 2404.06395), one schedule over all
``N`` steps of the run, phases ignored (the tail is just the run's last steps). With ``W`` the
warmup, ``D = round(decay_fraction * N)`` the decay's length and ``t`` the global step:

    lr(t) = peak * (t + 1) / W                          for t <  W
    lr(t) = peak                                        for W <= t < N - D
    lr(t) = floor + (peak - floor) * shape((t - (N - D) + 1) / D)   for t >= N - D

with ``shape(x) = 1 - x`` (linear) or ``(1 + cos(pi * x)) / 2`` (cosine), so the last step
trains at exactly ``floor``. Warmup wins where it overlaps the decay (a run shorter than
``W + D``): the rate is the smaller of the two.

Muon (``training.optimizer.name: muon``) follows the same curve scaled to its own peak:
its rate is ``lr(t) * muon_lr / peak``, with ``peak`` the schedule's peak rate
(``phase1.peak_lr`` or ``wsd.peak_lr``; :func:`peak_learning_rate`).
"""

from __future__ import annotations

import math

from trainer.config import PhaseSchedule, TrainingConfig, WSDSchedule
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


def wsd_learning_rate(global_step: int, total_steps: int, schedule: WSDSchedule) -> float:
    """The warmup-stable-decay rate of 0-based ``global_step`` of a run ``total_steps`` long."""
    if global_step < 0 or global_step >= total_steps:
        raise ValueError(f"step {global_step} is outside the run's {total_steps} steps")
    rate = schedule.peak_lr
    if global_step < schedule.warmup_steps:
        rate = schedule.peak_lr * (global_step + 1) / schedule.warmup_steps
    decay_steps = round(schedule.decay_fraction * total_steps)
    decay_start = total_steps - decay_steps
    if global_step >= decay_start:
        progress = (global_step - decay_start + 1) / decay_steps
        if schedule.decay_shape == "linear":
            remaining = 1.0 - progress
        else:
            remaining = (1.0 + math.cos(math.pi * progress)) / 2.0
        decayed = schedule.floor_lr + (schedule.peak_lr - schedule.floor_lr) * remaining
        rate = min(rate, decayed)
    return rate


def peak_learning_rate(training: TrainingConfig) -> float:
    """The schedule's peak rate: what ``muon_lr`` is relative to."""
    return training.wsd.peak_lr if training.schedule == "wsd" else training.phase1.peak_lr


def learning_rate(global_step: int, plan: RunPlan, training: TrainingConfig) -> float:
    """The learning rate of 0-based ``global_step`` of a run (phase 1 or 2 by position)."""
    if training.schedule == "wsd":
        return wsd_learning_rate(global_step, plan.total_steps, training.wsd)
    phase, step_in_phase, length = plan.phase_position(global_step)
    schedule = training.phase1 if phase == 1 else training.phase2
    return phase_learning_rate(step_in_phase, length, schedule)
