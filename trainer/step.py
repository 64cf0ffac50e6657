"""One training step of ``training.gradient_sum: all_reduce`` (DDP): forward/backward over the
micro-batches, one all-reduced decision, and the optimizer and EMA updates. The unit step of
``gradient_sum: units`` is ``trainer.unit_step``; both end in :func:`apply_step`.

Scaling (``trainer.loss`` defines the objective L over the G tasks of the global batch): each
micro-batch contributes ``(W / G) * sum of its task losses`` to the backward pass. Gradients
accumulate over a rank's micro-batches and DDP then averages over the W ranks (divides by W),
which leaves exactly dL/dθ for any W and any micro-batch layout.

After the backward passes: the gradient norm, then one all-reduce of [loss sum, non-finite
flag, signal, time up], so that every rank takes the same decisions -- skip the step (any
non-finite loss or gradient anywhere), or clip, set the scheduled learning rate, step the
optimizer and update the EMA; and whether this step is the segment's last. A process holding
more than ``training.release_memory_above_gb`` then returns its allocator's free pages to the
system (``trainer.heap``). The step calls its hook point (``trainer.hooks``) on the way, which
does nothing unless a test installed a hook.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel

from puicl_common.runtime import autocast_for
from trainer.batching import MicroBatch
from trainer.config import RunConfig, TrainingConfig
from trainer.dist_env import DistEnv, all_reduce_sum
from trainer.heap import release_if_above
from trainer.hooks import NO_HOOK, StepHook, hook_for
from trainer.loader import StepData
from trainer.loss import per_task_loss
from trainer.optimizers import set_learning_rate
from trainer.sampler import RunPlan
from trainer.schedule import learning_rate
from trainer.state import TrainingState


@dataclass(frozen=True)
class StepResult:
    """What a step reports: ``loss`` is the mean over the global batch's tasks."""

    loss: float
    grad_norm: float
    lr: float
    phase: int
    stage: int | str
    skipped: bool
    stop: bool  # a signal or the time limit on some rank: this step is the segment's last
    stop_reason: str  # "signal" or "time limit" (meaningful when stop is set)


def accumulate_micro_batches(
    module: torch.nn.Module,
    micro_batches: Sequence[MicroBatch],
    scale: float,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
    hook: StepHook = NO_HOOK,
) -> torch.Tensor:
    """Forward and backward micro-batch by micro-batch; returns the float64 sum of their
    per-task losses (on CPU).

    Each micro-batch adds ``scale * sum of its task losses`` to the gradients (``scale`` =
    W / G, see the module docstring). Under DDP only the last micro-batch synchronises the
    gradients across ranks (``no_sync`` on the others), so each rank makes exactly one
    all-reduce per step whatever its number of micro-batches.
    """
    # summed on the device and read once, after the last micro-batch: no synchronisation
    # between micro-batches
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    for i, micro in enumerate(micro_batches):
        on_device = micro.to(device)
        last = i == len(micro_batches) - 1
        sync = (
            module.no_sync()
            if isinstance(module, DistributedDataParallel) and not last
            else contextlib.nullcontext()
        )
        with sync:
            with autocast():
                logits = module(on_device.batch)
            losses = per_task_loss(
                logits, on_device.targets, on_device.unlabeled, on_device.index
            )
            losses = hook.micro_batch_losses(i, losses)
            (losses.sum() * scale).backward()
        loss_sum += losses.detach().double().sum()
    return hook.loss_sum(loss_sum.cpu())


def apply_step(state: TrainingState, training: TrainingConfig, plan: RunPlan, global_step: int,
               skip: bool) -> float:
    """The end of every step, taken alike by every rank: the scheduled learning rate, then
    the optimizer step and the EMA update, or the skip (gradients dropped, counted); then the
    allocator's free pages handed back above the configured size. Returns the rate."""
    lr = learning_rate(global_step, plan, training)
    set_learning_rate(state.optimizer, lr)
    counters = state.counters
    if skip:
        state.optimizer.zero_grad(set_to_none=True)
        counters.skipped_total += 1
        counters.consecutive_skips += 1
    else:
        state.optimizer.step()
        state.ema.update(state.model)
        counters.consecutive_skips = 0
    release_if_above(training.release_memory_above_gb)
    return lr


class DdpStep:
    """:func:`train_step` bound to a segment, called as the unit step is
    (``trainer.unit_step.UnitStep``)."""

    capture_guard = None  # no graphs captured here (the loader's lock: trainer.unit_graphs)

    def __init__(self, state: TrainingState, module: torch.nn.Module, config: RunConfig,
                 env: DistEnv, plan: RunPlan) -> None:
        self.state, self.module, self.config, self.env, self.plan = (
            state, module, config, env, plan)

    @classmethod
    def of(cls, state: TrainingState, module: torch.nn.Module, config: RunConfig, env: DistEnv,
           plan: RunPlan, units: object = None) -> DdpStep:
        return cls(state, module, config, env, plan)

    def train(self, data: StepData, stop_requested: Callable[[], bool],
              time_up: Callable[[], bool] = lambda: False) -> StepResult:
        return train_step(self.state, data, self.module, self.config, self.env, self.plan,
                          stop_requested, time_up)


def train_step(
    state: TrainingState,
    data: StepData,
    module: torch.nn.Module,
    config: RunConfig,
    env: DistEnv,
    plan: RunPlan,
    stop_requested: Callable[[], bool],
    time_up: Callable[[], bool] = lambda: False,
) -> StepResult:
    """Train global step ``data.global_step`` on this rank's ``data`` through ``module`` (the
    model, or its DDP / compiled wrapper). ``stop_requested`` (a signal) and ``time_up`` (the
    time limit) are asked after the backward passes, for the all-reduced decision."""
    global_step, address = data.global_step, data.address
    training = config.training
    global_batch = config.curriculum.global_batch
    hook = hook_for(global_step, env.rank)
    hook.step_begins()
    state.optimizer.zero_grad(set_to_none=True)
    local_loss = accumulate_micro_batches(
        module,
        data.micro_batches,
        scale=env.world_size / global_batch,
        device=env.device,
        autocast=lambda: autocast_for(training.precision, env.device),
        hook=hook,
    )
    hook.backward_done()
    clip = training.optimizer.grad_clip
    grad_norm = torch.nn.utils.clip_grad_norm_(
        state.model.parameters(), max_norm=clip if clip > 0 else float("inf")
    )
    nonfinite = not (torch.isfinite(local_loss) and torch.isfinite(grad_norm))
    decision = torch.tensor(
        [local_loss.item(), float(nonfinite), float(stop_requested()), float(time_up())],
        dtype=torch.float64,
        device=env.device,
    )
    all_reduce_sum(decision, env)
    skip = bool(decision[1].item() > 0)
    lr = apply_step(state, training, plan, global_step, skip)
    return StepResult(
        loss=decision[0].item() / global_batch,
        grad_norm=float(grad_norm),
        lr=lr,
        phase=address.phase,
        stage=address.stage,
        skipped=skip,
        # a signal or the time limit on any rank stops every rank after this step
        stop=bool(decision[2].item() > 0 or decision[3].item() > 0),
        stop_reason="signal" if decision[2].item() > 0 else "time limit",
    )
