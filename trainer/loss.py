"""The training objective (paper §5): cross-entropy over each task's unlabeled rows.

The loss of one step is the cross-entropy over the unlabeled rows of each task, averaged inside
the task, then averaged over the G tasks of the global batch:

    L = (1 / G) * sum_tasks mean_{unlabeled rows i of task} CE(logits_i, y_i)

This module computes the per-task terms; how a step sums and scales them over micro-batches
and ranks is ``trainer.step``'s part.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

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


def masked_task_loss(
    logits: torch.Tensor, targets: torch.Tensor, unlabeled: torch.Tensor
) -> torch.Tensor:
    """:func:`per_task_loss` with masks over every row position instead of an index of the
    unlabeled rows: float32 ``[B]``, the same up to the order of the sums.

    Every tensor's shape is the batch's, so a padded shape's loss is part of its fixed
    sequence of kernels (the unit step's compiled or captured graphs). The logits of the rows
    left out are replaced before the cross-entropy and its terms after it (``where``, never a
    product with zero), so nothing there reaches the loss or its gradient. Each task must
    have an unlabeled row (checked by :func:`loss_index` when a micro-batch is collated).
    """
    mask = unlabeled
    kept = torch.where(mask[..., None], logits.float(), 0.0)
    row_loss = F.cross_entropy(kept.flatten(0, 1), targets.flatten(), reduction="none")
    sums = torch.where(mask, row_loss.view_as(mask), 0.0).sum(dim=1)
    return sums / mask.sum(dim=1).to(sums.dtype)
