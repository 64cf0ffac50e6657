"""The unit step's plan and its exchange: the same bits on any number of processes.

Under ``training.gradient_sum: units`` a step's G tasks are cut into U = ``training.step_units``
units, a cut fixed by the config and the step's data alone:

* the step's tasks are ordered by row count (ties by their index in the step), and unit u
  holds tasks ``[u·G/U, (u+1)·G/U)`` of that order, so a unit's tasks have similar row counts
  (little padding where a unit is padded to one shape);
* rank r of W computes units r, r + W, r + 2W, ... (W must divide U): each rank gets large
  and small units alike;
* each unit's gradient is computed on its own: its micro-batches' backward passes, scaled by
  1/G (``trainer.loss``: the step's loss is the mean of its G task losses), accumulate into
  the parameters' gradients, which are then copied into the unit's row of a flat float32
  buffer and cleared;
* every rank gathers every unit's row (``all_gather``: bytes are moved, nothing is added)
  and adds them in unit order, ``((g_0 + g_1) + g_2) + ...``, on its own.

A unit's gradient does not depend on which process computes it or on which units it shares
that process with, so one process that runs every unit and N processes that share them hold
the same bytes, and the step's sum is the same sum. What feeds a decision (the loss, the
gradient's norm and clipping, the non-finite check, the stop requests) is computed from the
gathered bytes, so every rank decides alike. On CPU a unit's gradient depends on torch's
intra-op thread count (the kernels split their sums by thread), so the world-size invariance
holds at a fixed threads-per-process; on a GPU, at one device model and software build.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from puicl_common.configio import ConfigError
from trainer.batching import MicroBatch, plan_micro_batches
from trainer.config import RunConfig, TrainingConfig, UnitShapes
from trainer.dist_env import DistEnv

__all__ = ["FlatGradients", "StepUnit", "UnitPlan", "gather_units", "padded_size",
           "rank_units", "sum_in_unit_order", "thread_counts", "unit_plan",
           "warn_on_mixed_threads"]


@dataclass(frozen=True)
class StepUnit:
    """One unit of a step on the rank that computes it: its index and its micro-batches."""

    index: int
    micro_batches: list[MicroBatch]


@dataclass(frozen=True)
class UnitPlan:
    """How a step is cut into units and which units a rank computes (module docstring)."""

    global_batch: int  # G
    units: int  # U
    world_size: int  # W
    rank: int

    def __post_init__(self) -> None:
        if self.global_batch % self.units:
            raise ValueError(f"{self.units} units do not split a global batch of "
                             f"{self.global_batch} tasks evenly")
        if self.units % self.world_size:
            divisors = [w for w in range(1, self.units + 1) if self.units % w == 0]
            raise ValueError(
                f"the step's {self.units} units (training.step_units) do not split evenly "
                f"over {self.world_size} processes; use {', '.join(map(str, divisors))} "
                "processes"
            )

    @property
    def tasks_per_unit(self) -> int:
        return self.global_batch // self.units

    @property
    def local_units(self) -> list[int]:
        """The units this rank computes, in unit order: rank, rank + W, ..."""
        return list(range(self.rank, self.units, self.world_size))

    def unit_tasks(self, row_counts: Sequence[int]) -> list[list[int]]:
        """The step's task indices of every unit: tasks ordered by row count (ties by index),
        then cut into U runs of G/U."""
        if len(row_counts) != self.global_batch:
            raise ValueError(f"a step of {len(row_counts)} tasks, not {self.global_batch}")
        order = sorted(range(self.global_batch), key=lambda i: (int(row_counts[i]), i))
        k = self.tasks_per_unit
        return [order[u * k:(u + 1) * k] for u in range(self.units)]

    def gathered_order(self) -> list[int]:
        """The unit held by each row of the gathered buffer: rank 0's units, rank 1's, ..."""
        per_rank = self.units // self.world_size
        return [rank + j * self.world_size for rank in range(self.world_size)
                for j in range(per_rank)]


def padded_size(value: int, sizes: Sequence[int]) -> int:
    """The smallest of ``sizes`` (increasing) that holds ``value``; beyond the last, ``value``
    rounded up to a multiple of the last."""
    for size in sizes:
        if value <= size:
            return int(size)
    last = int(sizes[-1])
    return -(-value // last) * last


def unit_micro_batches(tasks: Sequence, training: TrainingConfig,
                       pin_memory: bool = False) -> list[MicroBatch]:
    """One unit's micro-batches (``training.micro_batch_size`` / ``micro_batch_cells``, ordered
    by row count), each padded to its shape of ``training.unit_shapes`` when that is set."""
    groups = plan_micro_batches(
        [t.x.shape[0] for t in tasks], [t.x.shape[1] for t in tasks],
        training.micro_batch_size, training.micro_batch_cells, training.group_by_rows,
    )
    shapes = training.unit_shapes
    assembled = []
    for group in groups:
        chosen = [tasks[j] for j in group]
        micro = MicroBatch.collate(chosen, _shape_of(chosen, shapes))
        assembled.append(micro.pin_memory() if pin_memory else micro)
    return assembled


def _shape_of(tasks: Sequence, shapes: UnitShapes | None) -> tuple[int, int] | None:
    if shapes is None:
        return None
    rows = max(t.x.shape[0] for t in tasks)
    features = max(t.x.shape[1] for t in tasks)
    return padded_size(rows, shapes.rows), padded_size(features, shapes.features)


class FlatGradients:
    """The parameters' gradients as one flat float32 vector, and back."""

    def __init__(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        self.parameters = list(parameters)
        self.sizes = [p.numel() for p in self.parameters]
        self.numel = sum(self.sizes)

    def read_into(self, out: torch.Tensor) -> None:
        """Copy the parameters' gradients into ``out`` [numel] (zeros where a parameter has
        none) and clear them: one concatenation, one kernel on a GPU."""
        grads = [torch.zeros_like(p).reshape(-1) if p.grad is None else p.grad.reshape(-1)
                 for p in self.parameters]
        torch.cat(grads, out=out)
        for param in self.parameters:
            param.grad = None

    def write(self, flat: torch.Tensor) -> None:
        """Make every parameter's gradient its slice of ``flat`` (a view, no copy)."""
        offset = 0
        for param, size in zip(self.parameters, self.sizes, strict=True):
            param.grad = flat[offset:offset + size].view_as(param)
            offset += size


def gather_units(local: torch.Tensor, plan: UnitPlan, env: DistEnv) -> torch.Tensor:
    """Every unit's row, in unit order: ``local`` [U/W, ...] holds this rank's units (in
    :attr:`UnitPlan.local_units` order); the result [U, ...] is the same bytes on every rank.

    ``all_gather`` moves bytes and adds nothing, so no reduction algorithm can change them.
    gloo gathers host tensors only: a GPU's rows travel through host memory there (two
    processes sharing one GPU, which NCCL refuses)."""
    if not env.distributed:
        rows = local
    else:
        through_host = env.backend == "gloo" and local.device.type != "cpu"
        sent = local.cpu() if through_host else local.contiguous()
        parts = [torch.empty_like(sent) for _ in range(env.world_size)]
        dist.all_gather(parts, sent)
        rows = torch.cat(parts)
        if through_host:
            rows = rows.to(local.device)
    order = plan.gathered_order()
    if order == list(range(plan.units)):
        return rows
    position = [0] * plan.units
    for row, unit in enumerate(order):
        position[unit] = row
    return rows[torch.tensor(position, device=rows.device)]


def sum_in_unit_order(rows: torch.Tensor) -> torch.Tensor:
    """``((rows[0] + rows[1]) + rows[2]) + ...``: one fixed order of additions, the same
    bytes on every rank and for every world size (a reduction kernel would choose its own)."""
    total = rows[0].clone()
    for row in rows[1:]:
        total += row
    return total


def rank_units(tasks: Sequence, plan: UnitPlan, training: TrainingConfig,
                     pin_memory: bool = False) -> tuple[StepUnit, ...]:
    """This rank's units of a step whose G tasks are ``tasks``, each collated into its
    micro-batches (in pinned memory for a GPU)."""
    cut = plan.unit_tasks([t.x.shape[0] for t in tasks])
    return tuple(
        StepUnit(u, unit_micro_batches([tasks[i] for i in cut[u]], training, pin_memory))
        for u in plan.local_units
    )


def unit_plan(config: RunConfig, env: DistEnv) -> UnitPlan | None:
    """This rank's :class:`UnitPlan` under ``training.gradient_sum: units`` (None: the DDP
    step); a world size that does not divide the units is a ``ConfigError``."""
    training = config.training
    if training.gradient_sum != "units":
        return None
    try:
        return UnitPlan(config.curriculum.global_batch, training.step_units, env.world_size,
                        env.rank)
    except ValueError as err:
        raise ConfigError("training.step_units", str(err)) from None


def warn_on_mixed_threads(env: DistEnv) -> None:
    """Warn (rank 0) when the ranks' thread counts differ: on CPU a unit's gradient depends on
    them, so the run's bits would depend on which rank computes which unit."""
    counts = thread_counts(env)
    if env.is_main and env.device.type == "cpu" and len(set(counts)) > 1:
        warnings.warn(
            f"the processes run {counts} torch threads: a unit's gradient on CPU depends on the "
            "thread count, so this run is not the same bits as another world size's; give every "
            "process the same --threads",
            stacklevel=3,
        )


def thread_counts(env: DistEnv) -> list[int]:
    """torch's intra-op thread count of every rank (a unit's gradient on CPU depends on it)."""
    mine = torch.tensor([torch.get_num_threads()], dtype=torch.int64)
    if not env.distributed:
        return [int(mine)]
    through_host = env.backend == "gloo" or env.device.type == "cpu"
    sent = mine if through_host else mine.to(env.device)
    parts = [torch.empty_like(sent) for _ in range(env.world_size)]
    dist.all_gather(parts, sent)
    return [int(part) for part in parts]
