"""The ``packed`` backend (and ``cpu_kernel``): a batch's real cells packed without padding.

The cells of all tasks are packed into one ``[n_cells, E]`` matrix: the projections, layer
norms and feed-forward layers run on it as single large matrix products, and each attention
runs per group of tasks that share a shape — attention across features over all rows of all
tasks with the same number of features in one call, attention across rows task by task.
Padding therefore costs no arithmetic, and no padded position ever enters an attention. A task
computed inside a batch goes through the same kernels with the same shapes as the task alone,
so the two agree to float32 rounding of the larger matrix products.

This suits a CPU, where arithmetic is the cost; on a GPU the per-task calls make a step
launch-bound (:mod:`puicl_model.net.backends.bucketed` is the layout for GPUs).

With ``compiled_kernel`` (the ``cpu_kernel`` backend), training's unmasked attentions run the
compiled kernels of :mod:`puicl_model.net.backends.cpu_kernel`; every other call runs PyTorch's
``scaled_dot_product_attention``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from puicl_model.net.backends import cpu_kernel
from puicl_model.net.backends.base import CellLayout, join, split
from puicl_model.net.backends.pruned_last_block import attend_features_from_label_cells
from puicl_model.net.batch import TaskBatch
from puicl_model.net.standardization import standardize_features

__all__ = ["PackedCells"]


@dataclass(frozen=True)
class _TaskSlot:
    """One task inside its group: which rows of the group are its."""

    task: int  # index in the batch
    first_row: int  # offset of its rows within the group
    rows: int
    labeled: int
    context: int  # rows before the query rows (== rows when there are none)
    features: int


@dataclass(frozen=True)
class _Group:
    """Tasks with the same number of columns, packed column-major.

    The group holds ``columns`` blocks of ``rows`` cells (all rows of all its tasks): cell
    (row i of the group, column j) is at ``start + j * rows + i``. Attention across features
    then runs once for the whole group; attention across rows runs per task on a contiguous
    row range of every column block, whose consecutive rows are adjacent in memory.
    """

    start: int
    columns: int  # features + 1 (label column last)
    rows: int
    slots: tuple[_TaskSlot, ...]

    @property
    def stop(self) -> int:
        return self.start + self.columns * self.rows


def attend_sdpa_rows(qkv: Tensor, num_heads: int, context: int) -> Tensor:
    """Attention across the rows of each column of one task. qkv [c, r, 3e] -> [c, r, e].

    Rows ``[0, context)`` attend to each other (all rows when ``context == r``, the paper's
    unmasked attention); query rows ``[context, r)`` attend to the context and to themselves.
    """
    c, r, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (
        t.transpose(1, 2)  # [c, H, r, dh]; consecutive rows 3e floats apart
        for t in qkv.view(c, r, 3, num_heads, e // num_heads).unbind(2)
    )
    if context == r:
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(c, r, e)
    out = F.scaled_dot_product_attention(q[:, :, :context], k[:, :, :context], v[:, :, :context])
    out = out.transpose(1, 2).reshape(c, context, e)
    queries = torch.arange(r - context, device=qkv.device).unsqueeze(1)
    keys = torch.arange(r, device=qkv.device).unsqueeze(0)
    visible = (keys < context) | (keys == queries + context)  # [r - context, r]
    extra = F.scaled_dot_product_attention(q[:, :, context:], k, v, attn_mask=visible)
    return torch.cat([out, extra.transpose(1, 2).reshape(c, r - context, e)], dim=1)


def attend_sdpa_features(qkv: Tensor, num_heads: int) -> Tensor:
    """Attention across the columns of each row: qkv [c, r, 3e] -> [c, r, e]."""
    columns, rows, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (
        t.permute(1, 2, 0, 3)  # [r, H, c, dh]
        for t in qkv.view(columns, rows, 3, num_heads, e // num_heads).unbind(2)
    )
    # Strided views, no copies: SDPA reads them in place and writes its output in the
    # query's memory order, here [c, r, H, dh], so the reshape back is free.
    out = F.scaled_dot_product_attention(q, k, v)
    return out.permute(2, 0, 1, 3).reshape(columns, rows, e)


class PackedCells(CellLayout):
    """The packing of a batch's cells into one ``[n_cells, e]`` matrix (module docstring)."""

    def __init__(self, groups: tuple[_Group, ...], n_cells: int, batch_size: int,
                 max_rows: int, compiled_kernel: bool = False) -> None:
        self.groups = groups
        self.n_cells = n_cells
        self.batch_size = batch_size
        self.max_rows = max_rows
        self.compiled_kernel = compiled_kernel

    @staticmethod
    def of(batch: TaskBatch, compiled_kernel: bool = False) -> PackedCells:
        sizes = batch.sizes()
        contexts = batch.context_sizes()
        by_columns: dict[int, list[int]] = {}
        for task, (_, _, features) in enumerate(sizes):
            by_columns.setdefault(features + 1, []).append(task)
        groups: list[_Group] = []
        start = 0
        for columns in sorted(by_columns):
            slots, rows = [], 0
            for task in by_columns[columns]:
                labeled, task_rows, features = sizes[task]
                slots.append(_TaskSlot(task, rows, task_rows, labeled, contexts[task], features))
                rows += task_rows
            group = _Group(start, columns, rows, tuple(slots))
            groups.append(group)
            start = group.stop
        return PackedCells(tuple(groups), start, batch.batch_size, int(batch.x.shape[1]),
                           compiled_kernel)

    @property
    def group_cells(self) -> list[int]:
        return [group.stop - group.start for group in self.groups]

    # ------------------------------------------------------------------ embedding
    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        """Packed cell embeddings [n_cells, e] (column-major per group, label column last)."""
        pieces = []
        for group in self.groups:
            z = join([  # [rows, features]: the tasks of a group have the same features
                standardize_features(
                    batch.x[slot.task, : slot.rows, : slot.features].float(), slot.labeled, clip
                )
                for slot in group.slots
            ])
            cells = embed_features(z.t())  # [features, rows, e]
            label = join([
                part
                for slot in group.slots
                for part in (labeled.expand(slot.labeled, -1),
                             unlabeled.expand(slot.rows - slot.labeled, -1))
            ])
            pieces.append(torch.cat([cells, label.unsqueeze(0)]).view(-1, cells.shape[-1]))
        return join(pieces)

    # ------------------------------------------------------------------ attention
    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        e = qkv.shape[1] // 3
        parts = []
        for group, block in zip(self.groups, split(qkv, self.group_cells), strict=True):
            block = block.view(group.columns, group.rows, 3 * e)
            if self.compiled_kernel and cpu_kernel.applies(block, num_heads):
                parts.append(cpu_kernel.attend_features(block, num_heads))
            else:
                parts.append(attend_sdpa_features(block, num_heads))
        return join([part.reshape(-1, e) for part in parts])

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        e = qkv.shape[1] // 3
        parts = []
        for group, block in zip(self.groups, split(qkv, self.group_cells), strict=True):
            block = block.view(group.columns, group.rows, 3 * e)
            task_blocks = split(block, [slot.rows for slot in group.slots], dim=1)
            pieces = [
                self._attend_task_rows(task_block, num_heads, slot.context)
                for slot, task_block in zip(group.slots, task_blocks, strict=True)
            ]
            parts.append(pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1))
        return join([part.reshape(-1, e) for part in parts])

    def _attend_task_rows(self, qkv: Tensor, num_heads: int, context: int) -> Tensor:
        unmasked = context == qkv.shape[1]
        if unmasked and self.compiled_kernel and cpu_kernel.applies(qkv, num_heads):
            return cpu_kernel.attend_rows(qkv, num_heads)
        return attend_sdpa_rows(qkv, num_heads, context)

    # ------------------------------------------------------------------ label cells and rows
    def label_column(self) -> PackedCells:
        """The layout of the label cells alone: each group reduced to its last column."""
        groups, start = [], 0
        for group in self.groups:
            groups.append(_Group(start, 1, group.rows, group.slots))
            start += group.rows
        return PackedCells(tuple(groups), start, self.batch_size, self.max_rows,
                           self.compiled_kernel)

    def attend_features_from_label_cells(self, query: Tensor, key_value: Tensor,
                                         num_heads: int) -> Tensor:
        return attend_features_from_label_cells(self, query, key_value, num_heads)

    def label_cells(self, h: Tensor) -> Tensor:
        """The label cells [n_rows, e] of packed cells ``h`` [n_cells, e], in group order.

        The label column of each group is its last block of ``rows`` cells.
        """
        sizes = [size for group in self.groups
                 for size in (group.stop - group.start - group.rows, group.rows)]
        return join(list(split(h, sizes)[1::2]))

    def scatter_rows(self, values: Tensor) -> Tensor:
        slots = [slot for group in self.groups for slot in group.slots]
        if len(slots) == 1 and slots[0].rows == self.max_rows:
            return values.view(1, self.max_rows, values.shape[-1])
        device = values.device
        task_index = torch.cat(
            [torch.full((slot.rows,), slot.task, dtype=torch.int64) for slot in slots]
        ).to(device)
        row_index = torch.cat([torch.arange(slot.rows) for slot in slots]).to(device)
        out = values.new_zeros(self.batch_size, self.max_rows, values.shape[-1])
        return out.index_put((task_index, row_index), values)
