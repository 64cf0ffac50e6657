"""The model's input: a padded batch of PU tasks (docs/architecture.md §4).

A PU task is a float32 matrix whose first ``n_labeled`` rows are labeled positives and whose
remaining rows are the unlabeled pool (docs/architecture.md §3). Tasks in one batch may differ
in all three sizes, so :class:`TaskBatch` stores them zero-padded to the largest of each
together with the true sizes. How much of the padding is computed on is the attention
backend's choice (:mod:`puicl_model.net.backends`); none of it reaches a real output.

Optionally the last rows of a task are *query rows* (``n_context`` < ``n_rows``): unlabeled
rows scored in the context of the rows before them without becoming part of it — no row
attends to a query row; a query row attends to the context and to itself. The classifier
scores new rows this way, so that a new row's prediction depends neither on the other new rows
nor on how they are grouped into passes. Training never sets ``n_context``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

__all__ = ["TaskBatch", "collate_tasks"]


@dataclass
class TaskBatch:
    """A batch of PU tasks, zero-padded to common sizes.

    ``x[b, :n_rows[b], :n_features[b]]`` is task ``b``; its rows ``[0, n_labeled[b])`` are the
    labeled positives and rows ``[n_labeled[b], n_rows[b])`` the unlabeled pool. Every other
    entry of ``x`` is zero padding.
    """

    x: Tensor  # float32 [B, R, F]
    n_labeled: Tensor  # int64 [B]
    n_rows: Tensor  # int64 [B]  (labeled + unlabeled)
    n_features: Tensor  # int64 [B]
    # int64 [B] or None (= n_rows): rows [n_context, n_rows) are query rows (module docstring)
    n_context: Tensor | None = None
    # the sizes as Python ints, read once: on a GPU every read of a device tensor waits for the
    # device, so a batch moved with .to() carries the sizes it had on the host
    _host_sizes: tuple[tuple[tuple[int, int, int], ...], tuple[int, ...]] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.x.dim() != 3:
            raise ValueError(f"TaskBatch.x must have shape [B, R, F], got {tuple(self.x.shape)}")
        batch = self.x.shape[0]
        for name in ("n_labeled", "n_rows", "n_features", "n_context"):
            value = getattr(self, name)
            if value is not None and value.shape != (batch,):
                raise ValueError(
                    f"TaskBatch.{name} must have shape [{batch}] (one entry per task), "
                    f"got {tuple(value.shape)}"
                )

    @property
    def batch_size(self) -> int:
        return int(self.x.shape[0])

    @property
    def device(self) -> torch.device:
        return self.x.device

    def to(self, device: torch.device | str, non_blocking: bool = False) -> TaskBatch:
        """The same batch on ``device``, carrying its host-side sizes along."""
        return self._map(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> TaskBatch:
        """A copy in page-locked host memory (a CUDA copy then reads it asynchronously)."""
        return self._map(Tensor.pin_memory)

    def _map(self, move: Callable[[Tensor], Tensor]) -> TaskBatch:
        return TaskBatch(
            x=move(self.x),
            n_labeled=move(self.n_labeled),
            n_rows=move(self.n_rows),
            n_features=move(self.n_features),
            n_context=None if self.n_context is None else move(self.n_context),
            _host_sizes=self._read_sizes(),
        )

    def _read_sizes(self) -> tuple[tuple[tuple[int, int, int], ...], tuple[int, ...]]:
        if self._host_sizes is None:
            stacked = torch.stack([self.n_labeled, self.n_rows, self.n_features], dim=1)
            sizes = tuple((int(a), int(b), int(c)) for a, b, c in stacked.tolist())
            source = self.n_rows if self.n_context is None else self.n_context
            self._host_sizes = (sizes, tuple(int(n) for n in source.tolist()))
        return self._host_sizes

    @property
    def row_index(self) -> Tensor:
        """int64 [1, R]: the row position, broadcastable against ``[B, R]``."""
        return torch.arange(self.x.shape[1], device=self.x.device).unsqueeze(0)

    @property
    def labeled_mask(self) -> Tensor:
        """bool [B, R]: the labeled positive rows of each task."""
        return self.row_index < self.n_labeled.unsqueeze(1)

    @property
    def unlabeled_mask(self) -> Tensor:
        """bool [B, R]: the unlabeled rows of each task (where the loss is computed)."""
        rows = self.row_index
        return (rows >= self.n_labeled.unsqueeze(1)) & (rows < self.n_rows.unsqueeze(1))

    @property
    def row_mask(self) -> Tensor:
        """bool [B, R]: the real (non-padding) rows of each task."""
        return self.row_index < self.n_rows.unsqueeze(1)

    def sizes(self) -> list[tuple[int, int, int]]:
        """``(n_labeled, n_rows, n_features)`` of every task, as Python ints (read once)."""
        return list(self._read_sizes()[0])

    def context_sizes(self) -> list[int]:
        """``n_context`` of every task (``n_rows`` where no query rows are set)."""
        return list(self._read_sizes()[1])

    def validate(self) -> None:
        """Raise ValueError unless every task's sizes fit the padded tensor and make sense."""
        rows_max, features_max = int(self.x.shape[1]), int(self.x.shape[2])
        for index, (labeled, rows, features) in enumerate(self.sizes()):
            where = f"task {index} of the batch"
            if not 1 <= features <= features_max:
                raise ValueError(f"{where}: n_features={features} outside [1, {features_max}]")
            if not 1 <= labeled < rows:
                raise ValueError(
                    f"{where}: needs at least one labeled and one unlabeled row, got "
                    f"n_labeled={labeled}, n_rows={rows}"
                )
            if rows > rows_max:
                raise ValueError(f"{where}: n_rows={rows} exceeds the padded size {rows_max}")
        if self.n_context is not None:
            for index, ((labeled, rows, _), context) in enumerate(
                zip(self.sizes(), self.context_sizes(), strict=True)
            ):
                if not labeled <= context <= rows:
                    raise ValueError(
                        f"task {index} of the batch: n_context={context} outside "
                        f"[n_labeled={labeled}, n_rows={rows}]"
                    )


def collate_tasks(
    xs: Sequence[np.ndarray | Tensor],
    n_labeled: Sequence[int],
    n_context: Sequence[int] | None = None,
) -> TaskBatch:
    """Stack tasks ``xs[i]`` (float ``[n_rows_i, n_features_i]``) into a zero-padded batch.

    ``n_labeled[i]`` is the number of labeled positive rows at the top of ``xs[i]``;
    ``n_context[i]`` (optional) the number of rows before its query rows.
    """
    if len(xs) == 0:
        raise ValueError("collate_tasks needs at least one task")
    if len(xs) != len(n_labeled):
        raise ValueError(
            f"collate_tasks: {len(xs)} tasks but {len(n_labeled)} n_labeled values"
        )
    tensors = [torch.as_tensor(x) for x in xs]
    for index, x in enumerate(tensors):
        if x.dim() != 2:
            raise ValueError(f"task {index}: expected a [n_rows, n_features] matrix, "
                             f"got shape {tuple(x.shape)}")
    rows = [int(x.shape[0]) for x in tensors]
    features = [int(x.shape[1]) for x in tensors]
    device = tensors[0].device
    padded = torch.zeros(len(tensors), max(rows), max(features), dtype=torch.float32,
                         device=device)
    for index, x in enumerate(tensors):
        padded[index, : rows[index], : features[index]] = x.to(device=device,
                                                                dtype=torch.float32)
    batch = TaskBatch(
        x=padded,
        n_labeled=torch.tensor([int(n) for n in n_labeled], dtype=torch.int64, device=device),
        n_rows=torch.tensor(rows, dtype=torch.int64, device=device),
        n_features=torch.tensor(features, dtype=torch.int64, device=device),
        n_context=None
        if n_context is None
        else torch.tensor([int(n) for n in n_context], dtype=torch.int64, device=device),
    )
    batch.validate()
    return batch
