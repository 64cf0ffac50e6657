"""The ``padded`` backend: a batch's cells as one padded block of a fixed shape, with masks.

The training step's units of tasks (``trainer.units``) may be stored in one of a few padded
shapes (rows × features); this layout computes over such a block as it is: ``[B, R, C, E]``
cells, C = F + 1 (the F feature columns of the padded tensor, then the label column), every
tensor's shape a function of the batch tensor's shape alone. Masks say who attends to whom,
as in the specification (:mod:`puicl_model.net.specification`), so each task keeps its own
rows and features and the padding never reaches a real output:

* across features, a cell attends to its task's feature cells and its label cell: a key
  mask over the C columns, the attention as batched products with a float32 softmax (the
  sequences are short; :func:`masked_short_attention`);
* across rows, a cell attends to its task's rows (and, with query rows, a query row to the
  context and to itself): a key mask over the R rows, one ``scaled_dot_product_attention``
  call for the whole block.

No size is read back to the host and no Python loop depends on the batch's contents, so one
shape's forward and backward are one fixed sequence of kernels: what ``torch.compile`` with
fixed shapes and a captured CUDA graph need. The last block computes the label cells only
(:meth:`PaddedCells.label_column`), as the packed layouts do.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from puicl_model.net.backends.base import CellLayout
from puicl_model.net.batch import TaskBatch
from puicl_model.net.standardization import standardize_padded

__all__ = ["PaddedCells", "masked_short_attention"]

# as the bucketed layouts: every kernel but cuDNN's, which plans a kernel per new shape
_ATTENTION_KERNELS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                      SDPBackend.MATH]


def masked_short_attention(q: Tensor, k: Tensor, v: Tensor, keys: Tensor) -> Tensor:
    """Attention over short sequences as batched products, keys masked: q [..., Lq, dh],
    k, v [..., L, dh], ``keys`` bool broadcastable to [..., Lq, L] (True: visible; every query
    sees at least one key). The softmax runs in float32, the products in the autocast dtype."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    scores = torch.where(keys, scores.float(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights.to(v.dtype), v)


class PaddedCells(CellLayout):
    """A batch's cells as one ``[B, R, C, E]`` block flattened to ``[B·R·C, E]`` (module
    docstring); ``columns`` is C, or 1 for the label column alone (:meth:`label_column`)."""

    def __init__(self, batch: TaskBatch, *, _columns: int | None = None) -> None:
        b, r, f = batch.x.shape
        device = batch.x.device
        self.batch = batch
        self.shape = (b, r, f + 1 if _columns is None else _columns)
        rows = torch.arange(r, device=device)
        self.labeled = rows < batch.n_labeled[:, None]  # [B, R]
        self.real_rows = rows < batch.n_rows[:, None]  # [B, R]
        columns = torch.arange(f + 1, device=device)
        # [B, C]: the task's feature columns and the label column (the last)
        self.real_columns = (columns < batch.n_features[:, None]) | (columns == f)
        if batch.n_context is None:
            self.row_keys = self.real_rows[:, None, None, :]  # [B, 1 (query), 1, R (keys)]
        else:  # a query row sees the context rows and itself
            context = rows < batch.n_context[:, None]
            itself = torch.eye(r, dtype=torch.bool, device=device) & self.real_rows[:, None, :]
            self.row_keys = ((context & self.real_rows)[:, None, :] | itself)[:, None]

    # ------------------------------------------------------------------ embedding
    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        # a padded feature standardizes to a finite value that no real cell attends to
        z = standardize_padded(batch.x.float(), batch.n_labeled, clip)  # [B, R, F]
        label = torch.where(self.labeled[..., None], labeled, unlabeled)  # [B, R, E]
        cells = torch.cat([embed_features(z), label.unsqueeze(2)], dim=2)  # [B, R, C, E]
        return cells.reshape(-1, cells.shape[-1])

    # ------------------------------------------------------------------ attention
    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        b, r, c = self.shape
        n, e = qkv.shape[0], qkv.shape[1] // 3
        q, k, v = qkv.view(b, r, c, 3, num_heads, -1).permute(3, 0, 1, 4, 2, 5)  # [B,R,H,C,dh]
        keys = self.real_columns[:, None, None, None, :]  # [B, 1, 1, 1, C]
        out = masked_short_attention(q, k, v, keys)  # [B, R, H, C, dh]
        return out.transpose(2, 3).reshape(n, e)

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        b, r, c = self.shape
        n, e = qkv.shape[0], qkv.shape[1] // 3
        q, k, v = (  # [B, C, H, R, dh] -> [B·C, H, R, dh]
            t.reshape(b * c, num_heads, r, -1)
            for t in qkv.view(b, r, c, 3, num_heads, -1).permute(3, 0, 2, 4, 1, 5)
        )
        rows_seen = self.row_keys.shape[-2]  # 1 (keys only) or R (query rows)
        mask = self.row_keys.expand(b, c, rows_seen, r).reshape(b * c, 1, rows_seen, r)
        with sdpa_kernel(_ATTENTION_KERNELS):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [B·C, H, R, dh]
        return out.view(b, c, num_heads, r, -1).permute(0, 3, 1, 2, 4).reshape(n, e)

    # ------------------------------------------------------------------ label cells and rows
    def label_cells(self, h: Tensor) -> Tensor:
        b, r, c = self.shape
        return h.view(b, r, c, -1)[:, :, -1].reshape(b * r, -1)

    def scatter_rows(self, values: Tensor) -> Tensor:
        b, r, _ = self.shape
        return torch.where(self.real_rows[..., None], values.view(b, r, -1), 0.0)

    def label_column(self) -> PaddedCells:
        """The label cells alone, ``[B, R, 1, E]``: the row attention over them as above."""
        return PaddedCells(self.batch, _columns=1)

    def attend_features_from_label_cells(self, query: Tensor, key_value: Tensor,
                                         num_heads: int) -> Tensor:
        b, r, c = self.shape
        e = query.shape[1]
        q = query.view(b, r, 1, num_heads, -1).transpose(2, 3)  # [B, R, H, 1, dh]
        k, v = key_value.view(b, r, c, 2, num_heads, -1).permute(3, 0, 1, 4, 2, 5)
        keys = self.real_columns[:, None, None, None, :]
        return masked_short_attention(q, k, v, keys).reshape(b * r, e)
