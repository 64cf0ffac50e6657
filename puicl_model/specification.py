"""The PUICL model of paper §3, written as plainly as possible: the specification.

This is the definition every faster path is tested against (``tests/model/test_backends.py``):
a dense, padded computation over a ``[B, R, C, E]`` tensor of cell embeddings (B tasks, R rows,
C = F + 1 columns: the F feature columns, then the label column), with key-padding masks for
the rows and features a task does not have, and PyTorch's ``scaled_dot_product_attention``.
Its parameters have the names of :class:`puicl_model.model.PUICLModel`'s, so one state dict
loads into both.

Per task, with ``n_labeled`` labeled positives on top of ``n_rows`` rows:

1. every feature is standardized with the mean and standard deviation of the labeled rows and
   clipped (§3.1, :mod:`puicl_model.standardization`);
2. a feature cell is embedded by ``feature_encoder`` (a linear map of its scalar); a label cell
   is ``target_encoder(1)`` for a labeled row and the learned ``unlabeled_token`` otherwise;
3. each block applies, post-norm:
   ``h = LN(h + attention across the features of each row)``,
   ``h = LN(h + attention across the rows of each column)``,
   ``h = LN(h + feed-forward)``;
4. the decoder maps each row's label cell to two logits ``[negative, positive]``.

Recipe options (``ModelConfig``; docs/training.md): ``norm: pre_rmsnorm`` makes each step
``h = h + f(RMSNorm(h))`` with a final RMSNorm before the decoder; ``thinking_rows: k`` puts k
learnable rows before every task's rows (feature cells ``thinking[i, 0]``, label cell
``thinking[i, 1]``): every row attends to them, they attend to the context, and they are not
decoded; ``feature_group: g`` makes each feature token the embedding of g consecutive
standardized features (zero-padded), ``feature_encoder`` then being Linear(g, E).

Query rows (``TaskBatch.n_context``) attend to the context rows and to themselves; no row
attends to them. Padded rows and feature columns are computed but never attended to, so they
cannot change a real output; padded output rows are set to zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from puicl_model.batch import TaskBatch
from puicl_model.config import ModelConfig
from puicl_model.standardization import LABELED_VALUE, standardize_padded

__all__ = ["PUICLSpecification"]


class SelfAttention(nn.Module):
    """Multi-head self-attention over the second-to-last axis of ``tokens`` [N, L, E]."""

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)

    def forward(self, tokens: Tensor, visible: Tensor) -> Tensor:
        """``visible`` [N, 1, L, L] (bool): which keys each query may attend to."""
        n, length, e = tokens.shape
        q, k, v = self.qkv(tokens).view(n, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)  # [N, H, L, dh]
        return self.out(attended.transpose(1, 2).reshape(n, length, e))


class DualAxisBlock(nn.Module):
    """Attention across features, attention across rows, feed-forward; each post-norm
    (LayerNorm) or pre-norm (RMSNorm)."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, pre_norm: bool) -> None:
        super().__init__()
        norm = nn.RMSNorm if pre_norm else nn.LayerNorm
        self.pre_norm = pre_norm
        self.attn_features = SelfAttention(embed_dim, num_heads)
        self.norm_features = norm(embed_dim)
        self.attn_rows = SelfAttention(embed_dim, num_heads)
        self.norm_rows = norm(embed_dim)
        self.ff = nn.Sequential(
            nn.Linear(embed_dim, ff_dim), nn.GELU(), nn.Linear(ff_dim, embed_dim)
        )
        self.norm_ff = norm(embed_dim)

    def residual(self, h: Tensor, f, norm: nn.Module) -> Tensor:
        return h + f(norm(h)) if self.pre_norm else norm(h + f(h))

    def forward(self, h: Tensor, columns_visible: Tensor, rows_visible: Tensor) -> Tensor:
        """h [B, R, C, E]; ``columns_visible`` [B·R, 1, C, C], ``rows_visible`` [B·C, 1, R, R]."""
        b, r, c, e = h.shape

        def across_features(x: Tensor) -> Tensor:
            return self.attn_features(x.reshape(b * r, c, e), columns_visible).view(h.shape)

        def across_rows(x: Tensor) -> Tensor:
            within_columns = x.transpose(1, 2).reshape(b * c, r, e)
            return self.attn_rows(within_columns, rows_visible).view(b, c, r, e).transpose(1, 2)

        h = self.residual(h, across_features, self.norm_features)
        h = self.residual(h, across_rows, self.norm_rows)
        return self.residual(h, self.ff, self.norm_ff)


class PUICLSpecification(nn.Module):
    """The model of paper §3, dense and padded; ``forward(batch)`` -> logits [B, R, 2]."""

    def __init__(self, config: ModelConfig | None = None) -> None:
        super().__init__()
        config = config if config is not None else ModelConfig()
        config.validate()
        self.config = config
        e = config.embed_dim
        self.feature_encoder = nn.Linear(config.feature_group, e)
        self.target_encoder = nn.Linear(1, e)
        self.unlabeled_token = nn.Parameter(torch.zeros(e))
        pre_norm = config.norm == "pre_rmsnorm"
        self.blocks = nn.ModuleList(
            DualAxisBlock(e, config.num_heads, config.ff_dim, pre_norm)
            for _ in range(config.num_layers)
        )
        self.decoder = nn.Sequential(
            nn.Linear(e, config.ff_dim), nn.GELU(), nn.Linear(config.ff_dim, 2)
        )
        self.norm_out = nn.RMSNorm(e) if pre_norm else nn.Identity()
        self.thinking = None
        if config.thinking_rows:
            self.thinking = nn.Parameter(torch.zeros(config.thinking_rows, 2, e))

    def forward(self, batch: TaskBatch) -> Tensor:
        batch.validate()
        x = batch.x.float()  # [B, R, F]
        b, r, f = x.shape
        rows = torch.arange(r, device=x.device)
        labeled = rows < batch.n_labeled[:, None]  # [B, R]
        real_rows = rows < batch.n_rows[:, None]
        context = batch.n_rows if batch.n_context is None else batch.n_context

        # 1-2. embeddings: [B, R, T, E] feature cells (T = F tokens of g features; a padded
        # feature standardizes to 0, as the padding of a task's last token) and [B, R, 1, E]
        # label cells
        g = self.config.feature_group
        z = standardize_padded(x, batch.n_labeled, self.config.feature_clip)
        f = -(-f // g)
        z = F.pad(z, (0, f * g - z.shape[-1])).view(b, r, f, g)
        cells = self.feature_encoder(z)
        labeled_cell = self.target_encoder(x.new_full((1,), LABELED_VALUE))
        label = torch.where(labeled[..., None], labeled_cell, self.unlabeled_token)
        h = torch.cat([cells, label.unsqueeze(2)], dim=2)  # [B, R, C, E]
        k = self.config.thinking_rows
        if k:  # k thinking rows before every task's rows: rows become [k + R]
            e = h.shape[-1]
            think = torch.cat([self.thinking[:, :1].expand(k, f, e), self.thinking[:, 1:]], 1)
            h = torch.cat([think.expand(b, k, f + 1, e), h], dim=1)
            r, rows = r + k, torch.arange(r + k, device=x.device)
            real_rows = rows < (batch.n_rows + k)[:, None]
            context = context + k

        # who may attend to whom: the task's features and its label column within a row;
        # within a column, the task's context rows, and a query row also to itself
        tokens = (batch.n_features + g - 1) // g
        real_columns = torch.arange(f + 1, device=x.device) < tokens[:, None]
        real_columns[:, f] = True  # the label column
        columns_visible = real_columns[:, None, None, :].expand(b, r, 1, f + 1)
        columns_visible = columns_visible.reshape(b * r, 1, 1, f + 1)
        keys_in_context = (rows < context[:, None]) & real_rows  # [B, R]
        rows_visible = keys_in_context[:, None, :] | (
            torch.eye(r, dtype=torch.bool, device=x.device) & real_rows[:, None, :]
        )  # [B, R (queries), R (keys)]
        rows_visible = rows_visible[:, None].expand(b, f + 1, r, r).reshape(b * (f + 1), 1, r, r)

        # 3. the blocks
        for block in self.blocks:
            h = block(h, columns_visible, rows_visible)

        # 4. the decoder reads the label cell of every row; padded rows are zero
        logits = self.decoder(self.norm_out(h[:, :, -1])).float()
        return torch.where(real_rows[..., None], logits, 0.0)[:, k:]
