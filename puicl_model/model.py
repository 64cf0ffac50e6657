"""The PUICL transformer (paper §3): cell embeddings, dual-axis blocks, a decoder.

Every cell of a task's table (``n_rows`` rows × ``n_features`` features, plus the label
column) is embedded independently; ``num_layers`` post-norm blocks then apply

    h = LN1(h + AttentionAcrossFeatures(h))   # within each row, over its d + 1 cells
    h = LN2(h + AttentionAcrossRows(h))       # within each column, over all n rows, no mask
    h = LN3(h + FeedForward(h))               # per cell, GELU

and a two-layer GELU decoder reads two logits ``[negative, positive]`` from the label cell of
every row (meaningful on the unlabeled rows). Three recipe options (``ModelConfig.norm``,
``thinking_rows``, ``feature_group``; docs/training.md) change this: pre-norm blocks with
RMSNorm, learnable rows appended to every table, several features per column token. There
is no positional encoding, so permuting rows or (with one feature per token) features permutes,
or leaves unchanged, the outputs.

How the cells of a batch of tasks of different sizes are stored, and how attention runs over
them, is the *attention backend*'s business (:mod:`puicl_model.backends`): ``packed`` (CPU),
``cpu_kernel`` (CPU training with compiled kernels) or ``bucketed`` (GPU), chosen by name.
Each computes the function of :mod:`puicl_model.specification`, the plain dense definition,
to float32 rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from puicl_model.backends import BACKENDS, CellLayout, cell_layout
from puicl_model.batch import TaskBatch
from puicl_model.config import ModelConfig

__all__ = ["DualAxisBlock", "PUICLModel", "SelfAttention"]


class SelfAttention(nn.Module):
    """Multi-head self-attention: packed q/k/v projection, attention, output projection.

    4·(e² + e) parameters, initialised like ``torch.nn.MultiheadAttention``. Along which axis
    the attention runs is given by the caller (``attend``: one of the layout's two attentions).
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, h: Tensor, attend) -> Tensor:
        return self.out(attend(self.qkv(h), self.num_heads))


class DualAxisBlock(nn.Module):
    """One transformer block: attention across features, across rows, feed-forward.

    Post-norm with LayerNorm (the paper), or with ``pre_norm`` pre-norm with RMSNorm.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int,
                 pre_norm: bool = False) -> None:
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

    def forward(self, h: Tensor, cells: CellLayout) -> Tensor:
        """h: the cells [n, e] in ``cells``' layout -> [n, e]."""
        if self.pre_norm:
            h = h + self.attn_features(self.norm_features(h), cells.attend_features)
            h = h + self.attn_rows(self.norm_rows(h), cells.attend_rows)
            return h + self.ff(self.norm_ff(h))
        h = self.norm_features(h + self.attn_features(h, cells.attend_features))
        h = self.norm_rows(h + self.attn_rows(h, cells.attend_rows))
        return self.norm_ff(h + self.ff(h))


class PUICLModel(nn.Module):
    """The PUICL transformer; ``forward(batch)`` -> logits float32 ``[B, R, 2]``.

    Column 0 of the logits is the negative class, column 1 the positive class. Rows are
    those of ``batch.x``; only the unlabeled rows of each task are meaningful (the labeled
    rows get finite values, padded rows exactly zero).

    ``attention`` names the backend (:data:`puicl_model.backends.BACKENDS`); ``auto`` takes
    ``bucketed`` for a batch on a GPU and ``packed`` otherwise.
    """

    def __init__(self, config: ModelConfig | None = None, attention: str = "auto") -> None:
        super().__init__()
        config = config if config is not None else ModelConfig()
        config.validate()
        if attention not in BACKENDS:
            raise ValueError(f"attention must be one of {', '.join(BACKENDS)}, got {attention!r}")
        self.config = config
        self.attention = attention
        e = config.embed_dim
        self.feature_encoder = nn.Linear(config.feature_group, e)
        self.target_encoder = nn.Linear(1, e)
        self.unlabeled_token = nn.Parameter(torch.empty(e))
        nn.init.normal_(self.unlabeled_token, std=0.02)
        pre_norm = config.norm == "pre_rmsnorm"
        self.blocks = nn.ModuleList(
            DualAxisBlock(e, config.num_heads, config.ff_dim, pre_norm)
            for _ in range(config.num_layers)
        )
        self.decoder = nn.Sequential(
            nn.Linear(e, config.ff_dim), nn.GELU(), nn.Linear(config.ff_dim, 2)
        )
        # Recipe options (docs/training.md), created last so that the default model draws the
        # same initial weights as before they existed.
        self.norm_out = nn.RMSNorm(e) if pre_norm else nn.Identity()  # pre-norm's final norm
        self.thinking = None  # [k, 2, e]: a thinking row's feature cells and its label cell
        if config.thinking_rows:
            self.thinking = nn.Parameter(torch.empty(config.thinking_rows, 2, e))
            nn.init.normal_(self.thinking, std=0.02)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per part: encoders, blocks, decoder and total."""

        def count(*modules: nn.Module | nn.Parameter) -> int:
            total = 0
            for module in modules:
                params = [module] if isinstance(module, nn.Parameter) else module.parameters()
                total += sum(p.numel() for p in params)
            return total

        encoders = [self.feature_encoder, self.target_encoder, self.unlabeled_token]
        counts = {
            "encoders": count(*encoders, *([self.thinking] if self.thinking is not None else [])),
            "blocks": count(self.blocks),
            "decoder": count(self.decoder, self.norm_out),
        }
        counts["total"] = sum(counts.values())
        return counts

    def embed(self, batch: TaskBatch, cells: CellLayout) -> Tensor:
        """The cells' embeddings [n, e] in ``cells``' layout (paper §3.1)."""
        return cells.embed(batch, self.feature_encoder, self.target_encoder,
                           self.unlabeled_token, self.config.feature_clip, self.thinking)

    def forward(self, batch: TaskBatch) -> Tensor:
        batch.validate()
        cells = cell_layout(self.attention, batch, self.config.thinking_rows,
                            self.config.feature_group)
        h = self.embed(batch, cells)
        *inner, last = self.blocks
        for block in inner:
            h = block(h, cells)
        # The decoder reads the label cells only; a layout may compute just those in the last
        # block (puicl_model.backends.pruned_last_block).
        logits = self.decoder(self.norm_out(cells.label_cells_after(last, h))).float()
        return cells.scatter_rows(logits)
