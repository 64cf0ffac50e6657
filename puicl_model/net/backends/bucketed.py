"""The ``bucketed`` backends: tasks padded within shape buckets, for GPUs.

On a GPU the packed layout's per-task attention calls (:mod:`puicl_model.net.backends.packed`)
would launch thousands of small kernels a step, so here the tasks of a batch are put into
buckets of equal feature count and similar row count
(rows rounded up to a multiple of ``row_grid``); within a bucket every task is padded to the
bucket's largest row count, so the bucket is a dense ``[b, R, C, E]`` block of cells. Each
attention then runs as one ``scaled_dot_product_attention`` call per bucket: across features
with no mask (all tasks of a bucket have the same columns), across rows with a key-padding
mask where a bucket holds padded or query rows.

All sizes are read on the host once, from the batch's host-side sizes
(:meth:`TaskBatch.sizes`), and the index tensors are built there and copied to the device
without waiting; the forward and backward passes have no per-task Python loop and no
device-to-host synchronisation.

Padded rows get finite values and are never attended to, so they cannot change a real output.

With a few large calls a step, the GPU runs kernels for nearly the whole step: the limit is
how efficient the kernels are, not how many are launched (a kernel profile of the paper's
model on one H100: about 2,040 kernels a step, attention 62 % of the GPU time, mostly flash
attention's backward pass). The attention across features is the worst fit for the flash
kernels: sequences of d + 1 ≤ 21 cells, tens of thousands of them per call, in heads of 16
dimensions, where flash's tiles of 64 or more queries stay mostly empty. The
``bucketed_matmul`` backend (``feature_products=True``) computes that attention as plain
batched matrix products instead (scores, a float32 softmax, the weighted sum; bfloat16
products under autocast), whose backward pass is deterministic without atomics. The attention
across rows, over hundreds of rows, keeps ``scaled_dot_product_attention``.

Both attentions run with cuDNN's attention kernels excluded (:data:`ATTENTION_KERNELS`). cuDNN
builds and caches a kernel plan for every new shape it meets, and the row counts of a training
step, or of a user's table, are new nearly every time: on tasks of thousands of rows the plans
cost many times the attention itself, and their cache grows the host memory step after step
(measured: docs/performance.md, "GPU").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from puicl_model.net.backends.base import CellLayout, join, split
from puicl_model.net.batch import TaskBatch
from puicl_model.net.standardization import standardize_padded

__all__ = ["ATTENTION_KERNELS", "DEFAULT_ROW_GRID", "BucketedCells"]

DEFAULT_ROW_GRID = 32
# the kernels the attentions may take: every one PyTorch has but cuDNN's (module docstring)
ATTENTION_KERNELS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@dataclass(frozen=True)
class _Bucket:
    """Tasks of one feature count and row-count class, stored as a dense [b, R, C, E] block."""

    start: int  # first cell of the block in h
    tasks: Tensor  # int64 [b] on the device: the tasks' indices in the batch
    n_labeled: Tensor  # int64 [b] on the device
    n_tasks: int
    rows: int  # R: the largest row count among the bucket's tasks
    features: int  # the tasks' features
    columns: int  # C: features + 1
    row_mask: Tensor | None  # bool [b, R, R] (query, key) or None when every key is visible

    @property
    def n_cells(self) -> int:
        return self.n_tasks * self.rows * self.columns


def _to_device(values: list[int] | np.ndarray, device: torch.device) -> Tensor:
    """Host integers -> an int64 tensor on ``device``, copied without waiting on a GPU."""
    host = torch.as_tensor(np.asarray(values, dtype=np.int64))
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def short_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Unmasked attention over short sequences as batched products: q, k, v [..., L, dh] ->
    [..., L, dh]. The scores are L × L per sequence, so for L of a few dozen they cost less
    memory than the q, k and v they come from; the softmax runs in float32 (autocast's rule
    for softmax), the products in the autocast dtype."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights.to(v.dtype), v)


class BucketedCells(CellLayout):
    """A batch's cells in shape buckets, padded within each bucket (module docstring)."""

    def __init__(self, batch: TaskBatch, row_grid: int = DEFAULT_ROW_GRID,
                 feature_products: bool = False) -> None:
        device = batch.device
        self.feature_products = feature_products
        sizes = batch.sizes()
        contexts = batch.context_sizes()
        keys: dict[tuple[int, int], list[int]] = {}
        for task, (_, rows, features) in enumerate(sizes):
            keys.setdefault((features, -(-rows // row_grid)), []).append(task)

        self.batch_size, self.max_rows = batch.batch_size, int(batch.x.shape[1])
        self.buckets: list[_Bucket] = []
        label_cell, label_task, label_row = [], [], []
        start = 0
        for features, _ in sorted(keys):
            tasks = keys[(features, _)]
            rows = max(sizes[task][1] for task in tasks)
            columns = features + 1
            row_mask = None
            if any(sizes[t][1] != rows or contexts[t] != rows for t in tasks):
                row_mask = self._row_mask(
                    [sizes[t][1] for t in tasks], [contexts[t] for t in tasks], rows, device
                )
            self.buckets.append(_Bucket(
                start=start, tasks=_to_device(tasks, device),
                n_labeled=_to_device([sizes[t][0] for t in tasks], device),
                n_tasks=len(tasks), rows=rows, features=features, columns=columns,
                row_mask=row_mask,
            ))
            # the label cells of the real rows: cell (position, row, C - 1) of the [b, R, C] block
            real = np.arange(rows)[None, :] < np.array([sizes[t][1] for t in tasks])[:, None]
            position, row = np.nonzero(real)
            label_cell.append(start + (position * rows + row) * columns + columns - 1)
            label_task.append(np.asarray(tasks)[position])
            label_row.append(row)
            start += len(tasks) * rows * columns
        self.n_cells = start
        self._label_cell = _to_device(np.concatenate(label_cell), device)
        self._label_task = _to_device(np.concatenate(label_task), device)
        self._label_row = _to_device(np.concatenate(label_row), device)

    @staticmethod
    def _row_mask(rows: list[int], contexts: list[int], padded: int,
                  device: torch.device) -> Tensor:
        """bool [b, R, R]: key j is visible to query i when j is a context row of the task, or
        j == i is a real row (a query row sees itself)."""
        index = torch.arange(padded)
        rows_t = torch.tensor(rows)[:, None]
        context = (index[None, :] < torch.tensor(contexts)[:, None]) & (index[None, :] < rows_t)
        itself = torch.eye(padded, dtype=torch.bool)[None] & (index < rows_t)[:, None, :]
        mask = context[:, None, :] | itself
        return mask.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else mask

    def _cell_counts(self) -> list[int]:
        return [bucket.n_cells for bucket in self.buckets]

    # ------------------------------------------------------------------ embedding
    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        pieces = []
        for bucket in self.buckets:
            x = batch.x.index_select(0, bucket.tasks)[:, : bucket.rows, : bucket.features].float()
            z = standardize_padded(x, bucket.n_labeled, clip)  # [b, R, F]
            cells = embed_features(z)  # [b, R, F, e]
            rows = torch.arange(bucket.rows, device=x.device)
            is_labeled = (rows < bucket.n_labeled[:, None])[..., None]  # [b, R, 1]
            label = torch.where(is_labeled, labeled, unlabeled)  # [b, R, e]
            block = torch.cat([cells, label.unsqueeze(2)], dim=2)  # [b, R, C, e]
            pieces.append(block.reshape(-1, block.shape[-1]))
        return join(pieces)

    # ------------------------------------------------------------------ attention
    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        e = qkv.shape[1] // 3
        parts = []
        with sdpa_kernel(ATTENTION_KERNELS):
            for bucket, block in zip(self.buckets, split(qkv, self._cell_counts()), strict=True):
                tokens = bucket.n_tasks * bucket.rows
                q, k, v = (block.view(tokens, bucket.columns, 3, num_heads, -1)
                           .permute(2, 0, 3, 1, 4))
                attend = short_attention if self.feature_products else \
                    F.scaled_dot_product_attention
                out = attend(q, k, v)  # [tokens, H, C, dh]
                parts.append(out.transpose(1, 2).reshape(-1, e))
        return join(parts)

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        e = qkv.shape[1] // 3
        parts = []
        with sdpa_kernel(ATTENTION_KERNELS):
            for bucket, block in zip(self.buckets, split(qkv, self._cell_counts()), strict=True):
                b, r, c = bucket.n_tasks, bucket.rows, bucket.columns
                # [b, R, C, 3, H, dh] -> q, k, v as [b·C, H, R, dh]
                q, k, v = (
                    t.reshape(b * c, num_heads, r, -1)
                    for t in block.view(b, r, c, 3, num_heads, -1).permute(3, 0, 2, 4, 1, 5)
                )
                mask = None
                if bucket.row_mask is not None:
                    mask = bucket.row_mask[:, None].expand(b, c, r, r).reshape(b * c, 1, r, r)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [b·C, H, R, dh]
                parts.append(out.view(b, c, num_heads, r, -1).permute(0, 3, 1, 2, 4)
                             .reshape(-1, e))
        return join(parts)

    # ------------------------------------------------------------------ label cells and rows
    def label_cells(self, h: Tensor) -> Tensor:
        return h.index_select(0, self._label_cell)

    def scatter_rows(self, values: Tensor) -> Tensor:
        out = values.new_zeros(self.batch_size, self.max_rows, values.shape[-1])
        return out.index_put((self._label_task, self._label_row), values)
