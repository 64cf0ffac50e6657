"""The specification: the model of :mod:`puicl_model.net.model` over the plainest cell layout.

Every attention backend is tested against :class:`PUICLSpecification`
(``tests/model/test_backends.py``). The model's embedding, blocks and decoder are written once,
in :mod:`puicl_model.net.model`; what a backend adds is a layout — where a batch's cells are stored
and how the two attentions run over them — and :class:`DenseCells` is that layout written as
directly as possible: a padded ``[B, R, C, E]`` tensor of cells (B tasks, R rows, C = F + 1
columns: the F feature columns, then the label column), explicit masks of which keys each query
may see, and one ``scaled_dot_product_attention`` call per axis.

Who attends to whom, per task with ``n_rows`` rows, ``n_features`` features and ``n_context``
context rows (all rows when the batch has no query rows):

* across features, a cell attends to the task's feature cells of its row and its label cell;
* across rows, a cell attends to the context rows of its column, and a query row also to
  itself; no row attends to a query row.

Padded rows and feature columns are computed but never attended to, so they cannot change a
real output; padded output rows are set to zero.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from puicl_model.net.backends.base import CellLayout
from puicl_model.net.batch import TaskBatch
from puicl_model.net.model import PUICLModel
from puicl_model.net.standardization import standardize_padded

__all__ = ["DenseCells", "PUICLSpecification"]


class DenseCells(CellLayout):
    """A batch's cells as one padded ``[B, R, C, E]`` block, flattened to ``[B·R·C, E]``."""

    def __init__(self, batch: TaskBatch) -> None:
        b, r, f = batch.x.shape
        c = f + 1
        self.shape = (b, r, c)
        device = batch.x.device
        rows = torch.arange(r, device=device)
        self.labeled = rows < batch.n_labeled[:, None]  # [B, R]
        self.real_rows = rows < batch.n_rows[:, None]
        context = batch.n_rows if batch.n_context is None else batch.n_context

        real_columns = torch.arange(c, device=device) < batch.n_features[:, None]
        real_columns[:, f] = True  # the label column
        # [B·R, 1, 1 (queries), C (keys)]
        self.columns_visible = real_columns[:, None, None, :].expand(b, r, 1, c).reshape(
            b * r, 1, 1, c)
        keys_in_context = (rows < context[:, None]) & self.real_rows  # [B, R]
        rows_visible = keys_in_context[:, None, :] | (
            torch.eye(r, dtype=torch.bool, device=device) & self.real_rows[:, None, :]
        )  # [B, R (queries), R (keys)]
        self.rows_visible = rows_visible[:, None].expand(b, c, r, r).reshape(b * c, 1, r, r)

    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        # a padded feature standardizes to a finite value that no real cell attends to
        z = standardize_padded(batch.x.float(), batch.n_labeled, clip)  # [B, R, F]
        label = torch.where(self.labeled[..., None], labeled, unlabeled)  # [B, R, E]
        cells = torch.cat([embed_features(z), label.unsqueeze(2)], dim=2)  # [B, R, C, E]
        return cells.reshape(-1, cells.shape[-1])

    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        b, r, c = self.shape
        n, e = qkv.shape[0], qkv.shape[1] // 3
        q, k, v = qkv.view(b * r, c, 3, num_heads, -1).permute(2, 0, 3, 1, 4)  # [B·R, H, C, dh]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.columns_visible)
        return out.transpose(1, 2).reshape(n, e)

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        b, r, c = self.shape
        n, e = qkv.shape[0], qkv.shape[1] // 3
        q, k, v = (  # [B·C, H, R, dh]
            t.reshape(b * c, num_heads, r, -1)
            for t in qkv.view(b, r, c, 3, num_heads, -1).permute(3, 0, 2, 4, 1, 5)
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.rows_visible)
        return out.view(b, c, num_heads, r, -1).permute(0, 3, 1, 2, 4).reshape(n, e)

    def label_cells(self, h: Tensor) -> Tensor:
        b, r, c = self.shape
        return h.view(b, r, c, -1)[:, :, -1].reshape(b * r, -1)

    def scatter_rows(self, values: Tensor) -> Tensor:
        b, r, _ = self.shape
        return torch.where(self.real_rows[..., None], values.view(b, r, -1), 0.0)


class PUICLSpecification(PUICLModel):
    """The model of paper §3 over :class:`DenseCells`; ``forward(batch)`` -> logits [B, R, 2].

    The same parameters, under the same names, as :class:`~puicl_model.net.model.PUICLModel`, so
    one state dict loads into both.
    """

    def layout(self, batch: TaskBatch) -> CellLayout:
        return DenseCells(batch)
