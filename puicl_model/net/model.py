"""The PUICL model (paper §3), top to bottom: cell embeddings, dual-axis blocks, a decoder.

A task is a table of ``n_rows`` rows × ``d`` features whose first ``n_labeled`` rows are the
labeled positives. Every cell of the table, plus one label cell per row, is embedded on its
own (§3.1):

* a feature cell is ``feature_encoder`` (Linear(1, e)) of its value, standardized with the
  mean and standard deviation of the labeled rows and clipped (:mod:`.standardization`);
* a label cell is ``target_encoder(1)`` for a labeled row and the learned ``unlabeled_token``
  for every other row.

``num_layers`` post-norm blocks (§3.2) then apply, to every cell,

    h = LN(h + AttentionAcrossFeatures(h))   # within each row, over its d + 1 cells
    h = LN(h + AttentionAcrossRows(h))       # within each column, over the rows
    h = LN(h + FeedForward(h))               # per cell, GELU

and a two-layer GELU decoder (§3.3) reads two logits ``[negative, positive]`` from the label
cell of every row (meaningful on the unlabeled rows). There is no positional encoding:
permuting rows or features permutes, or leaves unchanged, the outputs. Query rows
(``TaskBatch.n_context``) attend to the context rows and to themselves; no row attends to them.

What this file leaves open is where the cells of a batch of tasks of different sizes are
stored and how the two attentions run over them. That is a *cell layout*
(:class:`~puicl_model.net.backends.base.CellLayout`): the block calls the layout's two attention
functions; everything else in a block is per cell. The layouts are the attention backends
(:mod:`puicl_model.net.backends`: ``packed``, ``cpu_kernel``, ``bucketed``, chosen by name) and the
specification's plain dense one (:mod:`puicl_model.net.specification`), which every backend is
tested against. The one fused fast path, CPU inference without autograd
(:mod:`puicl_model.net.backends.packed_inference`), is tested against it too. New rows scored
next to a fitted context run the same blocks over the layouts of
:mod:`puicl_model.net.backends.cached_context`, which keep the context's keys and values at
each attention across rows (:meth:`PUICLModel.cell_logits`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from puicl_model.net.backends import BACKENDS, CellLayout, cell_layout
from puicl_model.net.batch import TaskBatch
from puicl_model.net.config import ModelConfig
from puicl_model.net.standardization import LABELED_VALUE

__all__ = ["DualAxisBlock", "PUICLModel", "SelfAttention"]

class SelfAttention(nn.Module):
    """Multi-head self-attention: packed q/k/v projection, attention, output projection.

    4·(e² + e) parameters, initialised like ``torch.nn.MultiheadAttention``. The attention
    itself, and so the axis it runs along, is the caller's ``attend`` (one of a layout's).
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, h: Tensor, attend: Callable[[Tensor, int], Tensor]) -> Tensor:
        """h [n, e] -> [n, e]; ``attend(qkv [n, 3e], num_heads)`` -> [n, e]."""
        return self.out(attend(self.qkv(h), self.num_heads))

    def from_queries(self, queries: Tensor, h: Tensor,
                     attend: Callable[[Tensor, Tensor, int], Tensor]) -> Tensor:
        """:meth:`forward` at some cells only: ``queries`` [m, e] (some of the cells of ``h``)
        attend to the keys and values of all cells ``h`` [n, e] -> [m, e].

        ``attend(query [m, e], key_value [n, 2e], num_heads)`` -> [m, e]. Only the m queries
        are projected, not the n.
        """
        e = h.shape[-1]
        key_value = F.linear(h, self.qkv.weight[e:], self.qkv.bias[e:])
        query = F.linear(queries, self.qkv.weight[:e], self.qkv.bias[:e])
        return self.out(attend(query, key_value, self.num_heads))


class DualAxisBlock(nn.Module):
    """One block (paper §3.2): attention across features, across rows, feed-forward, each a
    post-norm residual step with LayerNorm."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int) -> None:
        super().__init__()
        self.attn_features = SelfAttention(embed_dim, num_heads)
        self.norm_features = nn.LayerNorm(embed_dim)
        self.attn_rows = SelfAttention(embed_dim, num_heads)
        self.norm_rows = nn.LayerNorm(embed_dim)
        self.ff = nn.Sequential(
            nn.Linear(embed_dim, ff_dim), nn.GELU(), nn.Linear(ff_dim, embed_dim)
        )
        self.norm_ff = nn.LayerNorm(embed_dim)

    def forward(self, h: Tensor, cells: CellLayout) -> Tensor:
        """Every cell after the block: h [n, e] in ``cells``' layout -> [n, e]."""
        return self._steps(h, self.attn_features(h, cells.attend_features), cells)

    def label_cells(self, h: Tensor, cells: CellLayout) -> Tensor:
        """``cells.label_cells(self(h, cells))`` [n_rows, e], computing only what it needs
        where the layout can (:meth:`CellLayout.label_column`).

        A label cell's output depends on the keys and values of every cell of its row (the
        attention across features), then on label cells alone (the attention across rows stays
        within a column, the feed-forward is per cell). So the queries of the first step, and
        the whole of the other two, are needed at the label cells only: 1/(d+1) of the cells.
        The decoder reads nothing else, so the model computes its last block this way (≈ 15 %
        of a training step on CPU; docs/decisions.md). A method of its own, not a flag of
        :meth:`forward`: activation checkpointing wraps ``forward`` and should leave this
        block, whose activations are few, stored.
        """
        column = cells.label_column()
        if column is None:
            return cells.label_cells(self(h, cells))
        label = cells.label_cells(h)
        attend = cells.attend_features_from_label_cells
        attended = self.attn_features.from_queries(label, h, attend)
        return self._steps(label, attended, column)

    def _steps(self, h: Tensor, attended_features: Tensor, cells: CellLayout) -> Tensor:
        """The block's three residual steps, given the first step's attention output."""
        h = self.norm_features(h + attended_features)
        h = self.norm_rows(h + self.attn_rows(h, cells.attend_rows))
        return self.norm_ff(h + self.ff(h))


class PUICLModel(nn.Module):
    """The PUICL transformer; ``forward(batch)`` -> logits float32 ``[B, R, 2]``.

    Column 0 of the logits is the negative class, column 1 the positive class. Rows are
    those of ``batch.x``; only the unlabeled rows of each task are meaningful (the labeled
    rows get finite values, padded rows exactly zero).

    ``attention`` names the backend (:data:`puicl_model.net.backends.BACKENDS`); ``auto`` takes
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
        self.feature_encoder = nn.Linear(1, e)
        self.target_encoder = nn.Linear(1, e)
        self.unlabeled_token = nn.Parameter(torch.empty(e))
        if not self.unlabeled_token.is_meta:  # (a meta model has shapes only; on meta tensors
            # normal_ goes through torch._refs, which imports torch._dynamo: seconds of a start)
            nn.init.normal_(self.unlabeled_token, std=0.02)
        self.blocks = nn.ModuleList(
            DualAxisBlock(e, config.num_heads, config.ff_dim) for _ in range(config.num_layers)
        )
        self.decoder = nn.Sequential(
            nn.Linear(e, config.ff_dim), nn.GELU(), nn.Linear(config.ff_dim, 2)
        )

    def layout(self, batch: TaskBatch) -> CellLayout:
        """Where this model keeps ``batch``'s cells: its attention backend's layout."""
        return cell_layout(self.attention, batch)

    def keep_layout_eager(self) -> None:
        """Before ``torch.compile``: the compiled forward leaves :meth:`layout` eager, for it is
        host-side bookkeeping of the batch's sizes (Python loops, pinned host copies that the
        compiler cannot trace). Not a decorator: ``torch.compiler.disable`` imports
        torch._dynamo, seconds of every process's start, compiled or not."""
        self.layout = torch.compiler.disable(self.layout)  # type: ignore[method-assign]

    def forward(self, batch: TaskBatch) -> Tensor:
        batch.validate()
        cells = self.layout(batch)
        return self.cell_logits(self.embed(batch, cells), cells)

    def cell_logits(self, h: Tensor, cells: CellLayout) -> Tensor:
        """The logits of the rows whose embedded cells ``h`` are in ``cells``' layout: the
        blocks and the decoder. :meth:`forward` over the backend's layout; the query path over
        a cached context's (:mod:`puicl_model.net.backends.cached_context`)."""
        *inner, last = self.blocks
        for block in inner:
            h = block(h, cells)
        # the decoder reads the label cells only, so the last block computes only those
        logits = self.decoder(last.label_cells(h, cells)).float()
        return cells.scatter_rows(logits)

    # ------------------------------------------------------------------ cell embeddings (§3.1)
    def embed(self, batch: TaskBatch, cells: CellLayout) -> Tensor:
        """The cells' embeddings [n, e] in ``cells``' layout; the layout standardizes the
        features per task and places each embedding."""
        # Linear(1, e) of the label scalar, written out so that autocast leaves it float32
        labeled = self.target_encoder.weight[:, 0] * LABELED_VALUE + self.target_encoder.bias
        return cells.embed(batch, self.embed_features, labeled, self.unlabeled_token,
                           self.config.feature_clip)

    def embed_features(self, z: Tensor) -> Tensor:
        """Feature cells of standardized values ``z`` [...] -> [..., e]."""
        # Linear(1, e) written out: one fused multiply-add per cell
        weight, bias = self.feature_encoder.weight[:, 0], self.feature_encoder.bias
        return torch.addcmul(bias, z.unsqueeze(-1), weight)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per part: encoders, blocks, decoder and total."""
        encoders = [*self.feature_encoder.parameters(), *self.target_encoder.parameters(),
                    self.unlabeled_token]
        counts = {
            "encoders": sum(p.numel() for p in encoders),
            "blocks": sum(p.numel() for p in self.blocks.parameters()),
            "decoder": sum(p.numel() for p in self.decoder.parameters()),
        }
        counts["total"] = sum(counts.values())
        return counts
