"""One training step of ``training.gradient_sum: units``: the same bits on any number of
processes (the plan and the exchange: ``trainer.units``).

On each rank, for each of its units in unit order: the unit's micro-batches run forward and
backward (``trainer.unit_graphs``), each adding ``(1/G) * sum of its task losses`` to the
gradients, so that the units' gradients add up to exactly dL/dθ of the step's loss
(``trainer.loss``); the unit's gradient is then copied into its row of a flat buffer and
cleared. Then two gathers, bytes only: every unit's gradient row, and every unit's row of
[loss sum, signal, time up]. Every rank adds the rows in unit order and decides from those
bytes alone: the loss (the units' loss sums added in unit order, over G), the gradient's
norm (in float64) and its clipping, whether anything is non-finite (skip the step), whether
some rank asked to stop. The sum becomes the parameters' gradients and the step ends as the
DDP step does (:func:`trainer.step.apply_step`).

The hook point (``trainer.hooks``) is called at the same places as in the DDP step: a
micro-batch's losses before its backward pass (numbered across the rank's units), the rank's
loss sums (one per unit) before the gather.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import torch

from trainer.config import RunConfig
from trainer.dist_env import DistEnv
from trainer.hooks import hook_for
from trainer.loader import StepData
from trainer.sampler import RunPlan
from trainer.state import TrainingState
from trainer.step import StepResult, apply_step
from trainer.unit_graphs import UnitForward
from trainer.units import (
    FlatGradients,
    UnitPlan,
    gather_units,
    sum_in_unit_order,
    warn_on_mixed_threads,
)

__all__ = ["UnitStep"]

# clip_grad_norm_'s guard against a zero norm
_NORM_EPS = 1e-6


class UnitStep:
    """The unit step of one segment on one rank: its plan, the flat gradient layout and the
    forward of a micro-batch, built once; call :meth:`train` for every step."""

    def __init__(self, state: TrainingState, forward: UnitForward, config: RunConfig,
                 env: DistEnv, plan: RunPlan, units: UnitPlan) -> None:
        self.state, self.forward, self.config = state, forward, config
        self.env, self.plan, self.units = env, plan, units
        self.flat = FlatGradients(list(state.model.parameters()))

    @classmethod
    def of(cls, state: TrainingState, module: torch.nn.Module, config: RunConfig, env: DistEnv,
           plan: RunPlan, units: UnitPlan) -> UnitStep:
        """The unit step of a segment whose steps call ``module`` (the model, or the model
        compiled under ``training.compile``)."""
        warn_on_mixed_threads(env)
        forward = UnitForward(state.model, module, config.training, env.device)
        return cls(state, forward, config, env, plan, units)

    @property
    def capture_guard(self) -> threading.Lock:
        """Held while a CUDA graph is captured; the loader's thread takes it to prepare a
        step (no other thread may call CUDA during a capture: trainer.unit_graphs)."""
        return self.forward.capture_guard

    def train(self, data: StepData, stop_requested: Callable[[], bool],
              time_up: Callable[[], bool] = lambda: False) -> StepResult:
        """Train global step ``data.global_step`` from this rank's units ``data.units``."""
        state, env, training = self.state, self.env, self.config.training
        global_step, address = data.global_step, data.address
        global_batch = self.config.curriculum.global_batch
        hook = hook_for(global_step, env.rank)
        hook.step_begins()
        state.optimizer.zero_grad(set_to_none=True)
        expected = self.units.local_units
        if [unit.index for unit in data.units] != expected:  # a bug, never bad input
            raise RuntimeError(f"step {global_step}: units {[u.index for u in data.units]}, "
                               f"expected {expected}")
        local = torch.empty((len(expected), self.flat.numel), dtype=torch.float32,
                            device=env.device)
        losses = torch.zeros(len(expected), dtype=torch.float64, device=env.device)
        scale = 1.0 / global_batch
        micro_index = 0
        for k, unit in enumerate(data.units):
            for micro in unit.micro_batches:
                task_losses = self.forward(micro.to(env.device))
                task_losses = hook.micro_batch_losses(micro_index, task_losses)
                (task_losses.sum() * scale).backward()
                losses[k] += task_losses.detach().double().sum()
                micro_index += 1
            self.flat.read_into(local[k])
        losses = hook.loss_sum(losses)
        hook.backward_done()
        flags = torch.tensor([float(stop_requested()), float(time_up())], dtype=torch.float64)
        records = torch.cat([losses[:, None].cpu(), flags.expand(len(expected), 2)], dim=1)

        gradient = sum_in_unit_order(gather_units(local, self.units, env))
        records = gather_units(records.to(env.device), self.units, env).cpu()
        loss_sum = _sum_in_order(records[:, 0].tolist())
        norm = torch.linalg.vector_norm(gradient, dtype=torch.float64)
        clip = training.optimizer.grad_clip
        if clip > 0:
            coefficient = torch.clamp(clip / (norm + _NORM_EPS), max=1.0)
            gradient.mul_(coefficient.to(gradient.dtype))
        grad_norm = float(norm)
        skip = not (math.isfinite(loss_sum) and math.isfinite(grad_norm))
        if not skip:
            self.flat.write(gradient)
        lr = apply_step(state, training, self.plan, global_step, skip)
        stop = bool((records[:, 1] > 0).any())
        time_limit = bool((records[:, 2] > 0).any())
        return StepResult(
            loss=loss_sum / global_batch,
            grad_norm=grad_norm,
            lr=lr,
            phase=address.phase,
            stage=address.stage,
            skipped=skip,
            stop=stop or time_limit,
            stop_reason="signal" if stop else "time limit",
        )


def _sum_in_order(values: list[float]) -> float:
    """The units' loss sums added in unit order (Python floats: float64, one fixed order)."""
    total = 0.0
    for value in values:
        total += value
    return total
