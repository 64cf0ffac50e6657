"""The layouts of one task's context and of query rows scored next to it, through a cache.

A query row attends to the context rows and to itself, and no row attends to it (the
specification's rule, :mod:`puicl_model.net.specification`). So the context computes the same
whatever query rows are scored next to it: its keys and values at each block's attention across
rows can be computed once, and any number of query rows scored afterwards (the idea of a
transformer's kv cache, along the rows). Two layouts run the model's own forward
(:meth:`PUICLModel.cell_logits <puicl_model.net.model.PUICLModel.cell_logits>`) for this:

* :class:`ContextCells` holds a context's cells; its attention across rows is the plain one,
  and it records what query rows will read (the labeled rows' feature statistics, each
  block's keys and values) into a :class:`ContextCache`;
* :class:`QueryCells` holds the cells of query rows; its attention across rows attends each
  cell to the cached keys and values of its column and to itself.

Both store the cells as ``[rows, columns, e]`` (a row's cells side by side, the label cell
last) and answer for the label cells the ``[rows, 1, e]`` slice of it, so that every product
has one shape per context and block size. A query row's own term is added after the context's
sum: so a row's probability is the same bytes whatever rows it is scored with, in whatever
order (a masked attention would sum the row's own term at a place that moves with the batch).
Tested against the specification (``tests/model/test_query_rows.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from puicl_model.net.backends.base import CellLayout
from puicl_model.net.backends.bucketed import short_attention
from puicl_model.net.standardization import STD_FLOOR_ABSOLUTE, STD_FLOOR_RELATIVE

if TYPE_CHECKING:
    from puicl_model.net.batch import TaskBatch

__all__ = ["ALIGNED_KEYS", "ContextCache", "ContextCells", "QueryCells", "aligned_keys"]

# PyTorch's CPU flash attention returning each row's log-sum-exp (a private operator: where a
# build lacks it, query rows take the written-out products)
_CPU_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


@dataclass(frozen=True)
class ContextCache:
    """What query rows read of one context: the labeled rows' feature statistics, and the keys
    and values of the context's cells at each block's attention across rows
    (``[columns, heads, rows, head_dim]``; the last block's at the label column only).
    ``row_logits``: the context rows' own logits [rows, 2], the forward's output, so that a
    context's pool rows are scored by the same forward that built the cache (None where the
    cache was read from a file)."""

    mean: Tensor  # [d]
    scale: Tensor  # [d]
    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]
    row_logits: Tensor | None = None

    @property
    def nbytes(self) -> int:
        tensors = [self.mean, self.scale, *self.keys, *self.values, self.row_logits]
        return sum(t.element_size() * t.nelement() for t in tensors if t is not None)


def _heads(t: Tensor, num_heads: int) -> Tensor:
    """[rows, columns, e] -> [columns, heads, rows, head_dim]."""
    rows, columns, e = t.shape
    return t.view(rows, columns, num_heads, e // num_heads).permute(1, 2, 0, 3)


# keys a vector of the written-out attention across rows pads its context to (32 bytes of float32)
ALIGNED_KEYS = 8


def aligned_keys(context_rows: int) -> int:
    """The context's length padded to a multiple of :data:`ALIGNED_KEYS`."""
    return context_rows + -context_rows % ALIGNED_KEYS


def _aligned(t: Tensor) -> Tensor:
    """``t`` [..., context, head_dim] with the context axis zero-padded to
    :func:`aligned_keys` (``t`` itself where it is that long)."""
    missing = aligned_keys(t.shape[-2]) - t.shape[-2]
    return F.pad(t, (0, 0, 0, missing)) if missing else t


def _merge_heads(t: Tensor) -> Tensor:
    """[columns, heads, rows, head_dim] -> [rows, columns, e]."""
    columns, heads, rows, head_dim = t.shape
    return t.permute(2, 0, 1, 3).reshape(rows, columns, heads * head_dim)


class _RowCells(CellLayout):
    """One table's rows, each row's cells side by side: ``h`` [rows, columns, e]."""

    def __init__(self, n_labeled: int) -> None:
        self.n_labeled = n_labeled

    def _embed(self, z: Tensor, embed_features: Callable[[Tensor], Tensor], labeled: Tensor,
               unlabeled: Tensor) -> Tensor:
        """Cells [rows, d + 1, e] of standardized features ``z`` [rows, d]."""
        label = unlabeled.expand(z.shape[0], -1).clone()
        label[: self.n_labeled] = labeled
        return torch.cat([embed_features(z), label.unsqueeze(1)], dim=1)

    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        # [rows, heads, columns, head_dim]: rows are the batch, so each row is attended on its own
        q, k, v = (t.unflatten(-1, (num_heads, -1)).transpose(1, 2) for t in qkv.chunk(3, -1))
        return self._attend_columns(q, k, v).transpose(1, 2).flatten(2)

    _attend_columns = staticmethod(F.scaled_dot_product_attention)

    def attend_features_from_label_cells(self, query: Tensor, key_value: Tensor,
                                         num_heads: int) -> Tensor:
        q, k, v = (t.unflatten(-1, (num_heads, -1)).transpose(1, 2)
                   for t in (query, *key_value.chunk(2, dim=-1)))
        # written out: with one query per row, scaled_dot_product_attention's result depends
        # on the row's place in the batch (in the last bits)
        weights = torch.softmax((q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2), dim=-1)
        return (weights @ v).transpose(1, 2).flatten(2)

    def label_cells(self, h: Tensor) -> Tensor:
        return h[:, -1:]  # [rows, 1, e]: the label column, itself a layout of these rows

    def label_column(self) -> CellLayout:
        # the attention across rows is the same function of a column whatever the columns
        return self

    def scatter_rows(self, values: Tensor) -> Tensor:
        return values[:, 0].unsqueeze(0)  # [1, rows, k]: one task, no padding


class ContextCells(_RowCells):
    """A context's cells (its first ``n_labeled`` rows labeled); its forward fills
    :meth:`cache` as it goes."""

    def __init__(self, n_labeled: int) -> None:
        super().__init__(n_labeled)
        self._statistics: tuple[Tensor, Tensor] | None = None
        self._keys: list[Tensor] = []
        self._values: list[Tensor] = []

    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        x = batch.x[0].float()
        var, mean = torch.var_mean(x[: self.n_labeled], dim=0, correction=0)
        scale = torch.maximum(var.sqrt(), mean.abs() * STD_FLOOR_RELATIVE + STD_FLOOR_ABSOLUTE)
        self._statistics = (mean, scale)
        z = ((x - mean) / scale).clamp(-clip, clip)
        return self._embed(z, embed_features, labeled, unlabeled)

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        q, k, v = (_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))
        self._keys.append(k.contiguous())
        self._values.append(v.contiguous())
        return _merge_heads(F.scaled_dot_product_attention(q, k, v))

    def cache(self, row_logits: Tensor | None = None) -> ContextCache:
        """What the forward recorded, once it has run (``row_logits``: its output)."""
        if self._statistics is None:
            raise RuntimeError("ContextCells.cache() before the context's forward")
        mean, scale = self._statistics
        return ContextCache(mean, scale, tuple(self._keys), tuple(self._values), row_logits)


class QueryCells(_RowCells):
    """The cells of query rows (all unlabeled) next to the context of ``cache``. Each call of
    :meth:`attend_rows` reads the next block's keys and values: one forward per layout."""

    def __init__(self, cache: ContextCache) -> None:
        super().__init__(0)
        self.context = cache
        self._block = 0

    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        z = ((batch.x[0].float() - self.context.mean) / self.context.scale).clamp(-clip, clip)
        return self._embed(z, embed_features, labeled, unlabeled)

    @staticmethod
    def _attend_columns(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        # A query row's bytes must not depend on the rows scored with it. On a CPU,
        # scaled_dot_product_attention rounds a row by its place in the batch at some column
        # counts (17 columns of the tests' small model), so there the attention across features
        # is written out as batched products (a few per cent slower: speed/query_attention.py);
        # on a GPU the batched products of tiny matrices do (8 heads of 7 columns on an H100),
        # and the fused kernel, one sequence a thread block, did not (speed/row_invariance.py)
        return (F.scaled_dot_product_attention if q.is_cuda else short_attention)(q, k, v)

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        keys, values = self.context.keys[self._block], self.context.values[self._block]
        self._block += 1
        q, k_self, v_self = (_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))
        scale = q.shape[-1] ** -0.5
        own = (q * k_self).sum(-1, keepdim=True).mul_(scale)  # [c, H, rows, 1]
        if q.device.type == "cpu" and _CPU_FLASH is not None:
            # PyTorch's flash kernel over the context, with its log-sum-exp per row; the row's
            # own term joins after. About 2.5x the written-out products' speed on a CPU, and
            # still one shape per context and block size: a row's bytes do not depend on the
            # other rows of its block or their order (tests/model/test_query_rows.py)
            attended, log_sum = _CPU_FLASH(q.contiguous(), keys, values, 0.0, False)[:2]
            top = torch.maximum(log_sum.unsqueeze(-1), own)
            context_weight = (log_sum.unsqueeze(-1) - top).exp_()
            own_weight = (own - top).exp_()
            return _merge_heads((attended * context_weight + own_weight * v_self)
                                / (context_weight + own_weight))
        # the context axis padded to whole vectors of ALIGNED_KEYS keys: a GPU's reduction reads
        # each row of the scores from its address, and where the rows are not aligned alike it
        # splits each row's sum by the row's place in the block (measured on an H100:
        # speed/row_invariance.py); padded keys weigh exp(-inf) = 0
        context = keys.shape[-2]
        keys, values = _aligned(keys), _aligned(values)
        scores = torch.matmul(q, keys.transpose(-1, -2)).mul_(scale)  # [c, H, rows, context]
        if keys.shape[-2] > context:
            scores[..., context:] = float("-inf")
        top = torch.maximum(scores.amax(-1, keepdim=True), own)
        weights = scores.sub_(top).exp_()
        own_weight = (own - top).exp_()
        # the row's own term joins after the context's sum, so that its place never changes
        total = weights.sum(-1, keepdim=True) + own_weight
        return _merge_heads((torch.matmul(weights, values) + own_weight * v_self) / total)
