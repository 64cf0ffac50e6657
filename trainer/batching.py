"""From a step's tasks to losses: rank slices, micro-batches and the per-task loss.

The objective of one step (paper §5) is the cross-entropy over the unlabeled rows of each task,
averaged inside the task, then averaged over the G tasks of the global batch:

    L = (1 / G) * sum_tasks mean_{unlabeled rows i of task} CE(logits_i, y_i)

Rank r of W holds the contiguous slice ``[r*G/W, (r+1)*G/W)`` of the step's tasks and cuts it
into micro-batches. Each micro-batch contributes ``(W / G) * sum of its task losses`` to the
backward pass: gradients accumulate over micro-batches, DDP then averages over ranks (divides
by W), which leaves exactly dL/dθ for any W and any micro-batch layout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from puicl_model.batch import TaskBatch, collate_tasks, micro_batches


def rank_slice(global_batch: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[start, stop)`` of the step's tasks that ``rank`` of ``world_size`` trains on."""
    if global_batch % world_size:
        raise ValueError(
            f"the global batch of {global_batch} tasks does not split evenly over "
            f"{world_size} processes; use a process count that divides {global_batch}"
        )
    per_rank = global_batch // world_size
    return rank * per_rank, (rank + 1) * per_rank


def plan_micro_batches(
    row_counts: Sequence[int],
    feature_counts: Sequence[int],
    max_tasks: int,
    max_cells: int | None = None,
    group_by_rows: bool = True,
) -> list[list[int]]:
    """Indices of the tasks of each micro-batch: at most ``max_tasks`` tasks and (if given)
    ``max_cells`` table cells (rows x (features + 1)) per micro-batch; a task larger than
    ``max_cells`` alone forms a micro-batch.

    The model's activation memory is proportional to the cells of a forward pass, so the cell
    bound caps peak memory whatever the tasks' sizes. With ``group_by_rows`` the tasks are
    first ordered by row count (ties keep their order), which keeps tasks of similar size
    together (the cell bound then packs many small tasks or few large ones) and pads the
    input tensor less.
    """
    if len(row_counts) != len(feature_counts):
        raise ValueError(f"{len(row_counts)} row counts but {len(feature_counts)} feature counts")
    if max_tasks < 1:
        raise ValueError(f"max_tasks must be positive, got {max_tasks}")
    order = list(range(len(row_counts)))
    if group_by_rows:
        order.sort(key=lambda i: row_counts[i])
    return micro_batches(row_counts, feature_counts, max_cells, max_tasks=max_tasks, order=order)


def collate_with_targets(tasks: Sequence) -> tuple[TaskBatch, torch.Tensor, torch.Tensor]:
    """One padded ``TaskBatch`` plus hidden labels ``[B, R]`` (int64) and the mask of the
    unlabeled rows ``[B, R]`` (bool) -- the rows the loss is computed on."""
    batch = collate_tasks([t.x for t in tasks], [int(t.n_labeled) for t in tasks])
    n_tasks, max_rows = batch.x.shape[0], batch.x.shape[1]
    targets = np.zeros((n_tasks, max_rows), dtype=np.int64)
    unlabeled = np.zeros((n_tasks, max_rows), dtype=bool)
    for b, task in enumerate(tasks):
        n_rows = task.x.shape[0]
        targets[b, :n_rows] = task.y
        unlabeled[b, int(task.n_labeled) : n_rows] = True
    return batch, torch.from_numpy(targets), torch.from_numpy(unlabeled)


LossIndex = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def loss_index(unlabeled: torch.Tensor) -> LossIndex:
    """Where the loss is computed: the flat positions ``b * R + r`` of the unlabeled rows
    (int64, row-major), the task of each (int64) and each task's count (int64 ``[B]``).

    Computed on the host when a micro-batch is collated, so that the loss on a GPU needs no
    host-device synchronisation (a boolean mask index, a ``repeat_interleave`` by counts and
    the empty-task check each need one)."""
    counts = unlabeled.sum(dim=1)
    if bool((counts == 0).any()):
        raise ValueError("a task without unlabeled rows cannot be trained on")
    positions = unlabeled.flatten().nonzero().squeeze(1)
    tasks = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    return positions, tasks, counts


def per_task_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    unlabeled: torch.Tensor,
    index: LossIndex | None = None,
) -> torch.Tensor:
    """Mean cross-entropy over each task's unlabeled rows: float32 ``[B]``.

    ``logits`` ``[B, R, 2]`` (negative, positive); padded and labeled positions are ignored,
    and cannot leak NaN into the result (they are selected away, not multiplied by zero).
    ``index`` is :func:`loss_index` of ``unlabeled``, on ``logits``' device (computed here
    when not given).
    """
    logits = logits.float()
    positions, tasks, counts = loss_index(unlabeled) if index is None else index
    row_loss = F.cross_entropy(
        logits.flatten(0, 1).index_select(0, positions),
        targets.flatten().index_select(0, positions),
        reduction="none",
    )  # [total unlabeled rows], task by task in row-major order
    sums = torch.zeros(len(counts), dtype=row_loss.dtype, device=row_loss.device)
    sums = sums.index_add(0, tasks, row_loss)
    return sums / counts.to(row_loss.dtype)


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch ready for the model: the padded tasks, their hidden labels and the
    mask of the rows the loss is computed on (see :func:`collate_with_targets`)."""

    batch: TaskBatch
    targets: torch.Tensor  # int64 [B, R]
    unlabeled: torch.Tensor  # bool [B, R]
    index: LossIndex  # loss_index(unlabeled)

    @classmethod
    def collate(cls, tasks: Sequence) -> MicroBatch:
        batch, targets, unlabeled = collate_with_targets(tasks)
        return cls(batch, targets, unlabeled, loss_index(unlabeled))

    def pin_memory(self) -> MicroBatch:
        """A copy in page-locked host memory, which a CUDA copy can read asynchronously."""
        return MicroBatch(
            self.batch.pin_memory(),
            self.targets.pin_memory(),
            self.unlabeled.pin_memory(),
            tuple(t.pin_memory() for t in self.index),
        )

    def to(self, device: torch.device) -> MicroBatch:
        """The micro-batch on ``device``. From pinned memory to a GPU the copies are queued
        on the current stream without waiting (``non_blocking``), so they overlap the host's
        work; from pageable memory ``non_blocking`` has no effect. The batch keeps its
        host-side sizes, so the model reads none back from the device."""
        def move(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.to(device, non_blocking=True)

        return MicroBatch(
            self.batch.to(device, non_blocking=True),
            move(self.targets),
            move(self.unlabeled),
            tuple(move(t) for t in self.index),
        )


def assemble_micro_batches(
    tasks: Sequence, groups: Sequence[Sequence[int]], pin_memory: bool = False
) -> list[MicroBatch]:
    """The micro-batches of ``groups`` (task indices, from :func:`plan_micro_batches`), in
    order; in pinned memory when they are going to a GPU."""
    assembled = []
    for group in groups:
        micro = MicroBatch.collate([tasks[j] for j in group])
        assembled.append(micro.pin_memory() if pin_memory else micro)
    return assembled


def accumulate_gradients(
    module: torch.nn.Module,
    tasks: Sequence,
    groups: Sequence[Sequence[int]],
    scale: float,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
    corrupt: str | None = None,
) -> torch.Tensor:
    """:func:`accumulate_micro_batches` over the micro-batches ``groups`` of ``tasks``."""
    return accumulate_micro_batches(
        module, assemble_micro_batches(tasks, groups), scale, device, autocast, corrupt
    )


def accumulate_micro_batches(
    module: torch.nn.Module,
    micro_batches: Sequence[MicroBatch],
    scale: float,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
    corrupt: str | None = None,
) -> torch.Tensor:
    """Forward and backward micro-batch by micro-batch; returns the float64 sum of their
    per-task losses (on CPU).

    Each micro-batch adds ``scale * sum of its task losses`` to the gradients (``scale`` =
    W / G, see the module docstring). Under DDP only the last micro-batch synchronises the
    gradients across ranks (``no_sync`` on the others), so each rank makes exactly one
    all-reduce per step whatever its number of micro-batches. Fault-injection tests only:
    ``corrupt="grad"`` makes the first micro-batch's losses NaN before the backward pass (NaN
    gradients, which DDP spreads to every rank); ``corrupt="loss"`` makes the returned loss
    NaN but leaves the gradients finite (only the all-reduced flag then stops the others).
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
            if corrupt == "grad" and i == 0:
                losses = losses * float("nan")
            (losses.sum() * scale).backward()
        loss_sum += losses.detach().double().sum()
    loss_sum = loss_sum.cpu()
    if corrupt == "loss":
        loss_sum += float("nan")
    return loss_sum
