"""From a step's tasks to micro-batches: rank slices, cell-bounded groups and collation.

Rank r of W holds the contiguous slice ``[r*G/W, (r+1)*G/W)`` of the step's G tasks and cuts it
into micro-batches, each collated with the hidden labels and the rows the loss is computed on
(``trainer.loss``); ``trainer.step`` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from puicl_model.net.batch import TaskBatch, collate_tasks
from trainer.loss import LossIndex, loss_index


def rank_slice(global_batch: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[start, stop)`` of the step's tasks that ``rank`` of ``world_size`` trains on."""
    if global_batch % world_size:
        raise ValueError(
            f"the global batch of {global_batch} tasks does not split evenly over "
            f"{world_size} processes; use a process count that divides {global_batch}"
        )
    per_rank = global_batch // world_size
    return rank * per_rank, (rank + 1) * per_rank


def micro_batches(
    n_rows: Sequence[int],
    n_features: Sequence[int],
    max_cells: int | None,
    max_tasks: int | None = None,
    order: Sequence[int] | None = None,
) -> list[list[int]]:
    """Split tasks into consecutive groups of at most ``max_cells`` table cells and (if given)
    ``max_tasks`` tasks.

    A task of ``r`` rows and ``f`` features has ``r * (f + 1)`` cells (the label column
    included); the model's activation memory is proportional to the cells of a forward pass.
    A task larger than ``max_cells`` forms a group of its own; ``max_cells=None`` bounds the
    task count only. Tasks are taken in ``order`` (default: as given), so that a caller's
    per-task results stay aligned with its inputs.
    """
    if len(n_rows) != len(n_features):
        raise ValueError(f"{len(n_rows)} row counts but {len(n_features)} feature counts")
    if max_cells is not None and max_cells < 1:
        raise ValueError(f"max_cells must be positive, got {max_cells}")
    if max_tasks is not None and max_tasks < 1:
        raise ValueError(f"max_tasks must be positive, got {max_tasks}")
    groups: list[list[int]] = []
    current: list[int] = []
    current_cells = 0
    for index in range(len(n_rows)) if order is None else order:
        cells = int(n_rows[index]) * (int(n_features[index]) + 1)
        full = (max_tasks is not None and len(current) >= max_tasks) or (
            max_cells is not None and current_cells + cells > max_cells
        )
        if current and full:
            groups.append(current)
            current, current_cells = [], 0
        current.append(index)
        current_cells += cells
    if current:
        groups.append(current)
    return groups


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


def collate_with_targets(
    tasks: Sequence, shape: tuple[int, int] | None = None
) -> tuple[TaskBatch, torch.Tensor, torch.Tensor]:
    """One padded ``TaskBatch`` plus hidden labels ``[B, R]`` (int64) and the mask of the
    unlabeled rows ``[B, R]`` (bool) -- the rows the loss is computed on.

    Padded to the largest task's rows and features, or to ``shape`` (rows, features) when
    given (the unit step's padded shapes, ``trainer.units``); every task keeps its sizes."""
    batch = collate_tasks([t.x for t in tasks], [int(t.n_labeled) for t in tasks])
    if shape is not None:
        batch = _padded_to(batch, *shape)
    n_tasks, max_rows = batch.x.shape[0], batch.x.shape[1]
    targets = np.zeros((n_tasks, max_rows), dtype=np.int64)
    unlabeled = np.zeros((n_tasks, max_rows), dtype=bool)
    for b, task in enumerate(tasks):
        n_rows = task.x.shape[0]
        targets[b, :n_rows] = task.y
        unlabeled[b, int(task.n_labeled) : n_rows] = True
    return batch, torch.from_numpy(targets), torch.from_numpy(unlabeled)


def _padded_to(batch: TaskBatch, rows: int, features: int) -> TaskBatch:
    """``batch`` with its tensor zero-padded to ``rows`` x ``features``."""
    b, r, f = batch.x.shape
    if rows < r or features < f:
        raise ValueError(f"a shape of {rows} x {features} cannot hold tasks of {r} rows and "
                         f"{f} features")
    x = torch.zeros((b, rows, features), dtype=batch.x.dtype)
    x[:, :r, :f] = batch.x
    return TaskBatch(x=x, n_labeled=batch.n_labeled, n_rows=batch.n_rows,
                     n_features=batch.n_features)


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch ready for the model: the padded tasks, their hidden labels and the
    mask of the rows the loss is computed on (see :func:`collate_with_targets`)."""

    batch: TaskBatch
    targets: torch.Tensor  # int64 [B, R]
    unlabeled: torch.Tensor  # bool [B, R]
    index: LossIndex  # loss_index(unlabeled)

    @classmethod
    def collate(cls, tasks: Sequence, shape: tuple[int, int] | None = None) -> MicroBatch:
        batch, targets, unlabeled = collate_with_targets(tasks, shape)
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
