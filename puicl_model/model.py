"""The PUICL transformer (paper §3): cell embeddings, dual-axis blocks, a decoder.

Every cell of a task's table (``n_rows`` rows × ``n_features`` features, plus the label
column) is embedded independently; ``num_layers`` post-norm blocks then apply

    h = LN1(h + AttentionAcrossFeatures(h))   # within each row, over its d + 1 cells
    h = LN2(h + AttentionAcrossRows(h))       # within each column, over all n rows, no mask
    h = LN3(h + FeedForward(h))               # per cell, GELU

and a two-layer GELU decoder reads two logits ``[negative, positive]`` from the label cell of
every row (meaningful on the unlabeled rows). There is no positional encoding, so permuting
rows or features permutes (or leaves unchanged) the outputs.

How a batch is computed. Tasks of one batch may differ in rows and features. Instead of
padding them and masking the attention, the forward pass *packs* the real cells of all tasks
into one ``[n_cells, e]`` matrix: the projections, layer norms and feed-forward layers run on
it as single large matrix products, and each attention runs per group of tasks that share a
shape — feature attention over all rows of all tasks with the same number of features in one
call, row attention task by task. Padding therefore costs no arithmetic, and no padded
position ever enters an attention (so none can produce a NaN that leaks into real outputs or
gradients); padded output positions are exactly zero. A task computed inside a batch goes
through the same kernels with the same shapes as the task alone, so the two agree to float32
rounding of the larger matrix products.

The last block computes only what the decoder reads: the keys and values of all cells, and
everything else for the label column alone (``DualAxisBlock._forward_label_cells``).

In training on CPU, both attentions of 16-dimensional heads (across rows and across features)
run compiled kernels of ours, forward and backward (:mod:`puicl_model.cpu_attention`);
elsewhere they are PyTorch's ``scaled_dot_product_attention``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from puicl_model.batch import TaskBatch
from puicl_model.config import ModelConfig
from puicl_model.cpu_attention import attend_features, attend_rows

__all__ = ["STD_FLOOR_ABSOLUTE", "STD_FLOOR_RELATIVE", "PUICLModel", "standardize_features"]

# Feature standardization divides by the labeled rows' population standard deviation, floored
# at STD_FLOOR_RELATIVE * |mean| + STD_FLOOR_ABSOLUTE. The relative part lies well above the
# float32 rounding of a constant column's mean (~1e-7 relative), so a column that is constant
# on the labeled rows standardizes to exactly 0 there, to ≈ 0 for unlabeled rows holding the
# same value, and saturates at ±feature_clip for unlabeled rows holding any other value: "this
# value never occurs among the labeled positives", which is the PU-relevant signal.
STD_FLOOR_RELATIVE = 1e-5
STD_FLOOR_ABSOLUTE = 1e-8

# The label scalar fed to the target encoder for labeled rows (label 1 = positive, DESIGN §2).
LABELED_VALUE = 1.0


def standardize_features(x: Tensor, n_labeled: int, clip: float) -> Tensor:
    """Standardize each column of one task ``x`` [n_rows, d] with its labeled rows' statistics.

    Mean and population standard deviation over rows ``[0, n_labeled)`` (paper §3.1), the
    standard deviation floored as described at :data:`STD_FLOOR_RELATIVE`; the result is
    clipped to ``[-clip, clip]``.
    """
    labeled = x[:n_labeled]
    var, mean = torch.var_mean(labeled, dim=0, correction=0, keepdim=True)
    scale = torch.maximum(var.sqrt(), mean.abs() * STD_FLOOR_RELATIVE + STD_FLOOR_ABSOLUTE)
    return ((x - mean) / scale).clamp(-clip, clip)


class SelfAttention(nn.Module):
    """Multi-head self-attention weights: packed q/k/v projection and output projection.

    4·(e² + e) parameters, initialised like ``torch.nn.MultiheadAttention``. The attention
    itself is computed by the block, which knows along which axis it runs.
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)


def _attend_within_columns(qkv: Tensor, num_heads: int, context: int) -> Tensor:
    """Attention across the rows of each column of one task. qkv [c, r, 3e] -> [c, r, e].

    Rows ``[0, context)`` attend to each other (all rows when ``context == r``, the paper's
    unmasked attention); query rows ``[context, r)`` attend to the context and to themselves.
    """
    c, r, three_e = qkv.shape
    if context == r:  # every row is context (training): the compiled kernel on CPU
        return attend_rows(qkv, num_heads)
    e = three_e // 3
    q, k, v = (
        t.transpose(1, 2)  # [c, H, r, dh]; consecutive rows 3e floats apart
        for t in qkv.view(c, r, 3, num_heads, e // num_heads).unbind(2)
    )
    out = F.scaled_dot_product_attention(q[:, :, :context], k[:, :, :context], v[:, :, :context])
    out = out.transpose(1, 2).reshape(c, context, e)
    queries = torch.arange(r - context, device=qkv.device).unsqueeze(1)
    keys = torch.arange(r, device=qkv.device).unsqueeze(0)
    visible = (keys < context) | (keys == queries + context)  # [r - context, r]
    extra = F.scaled_dot_product_attention(q[:, :, context:], k, v, attn_mask=visible)
    return torch.cat([out, extra.transpose(1, 2).reshape(c, r - context, e)], dim=1)


@dataclass(frozen=True)
class _TaskSlot:
    """One task inside its group: which rows of the group are its."""

    task: int  # index in the batch
    first_row: int  # offset of its rows within the group
    rows: int
    labeled: int
    context: int  # rows before the query rows (== rows when there are none)


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


@dataclass(frozen=True)
class _PackedLayout:
    """The packing of a batch's cells into one ``[n_cells, e]`` matrix."""

    groups: tuple[_Group, ...]
    n_cells: int

    @property
    def group_cells(self) -> list[int]:
        return [group.stop - group.start for group in self.groups]

    def label_column(self) -> _PackedLayout:
        """The layout of the label cells alone: each group reduced to its last column."""
        groups, start = [], 0
        for group in self.groups:
            groups.append(_Group(start, 1, group.rows, group.slots))
            start += group.rows
        return _PackedLayout(tuple(groups), start)

    def label_cells(self, h: Tensor) -> Tensor:
        """The label cells [n_rows, e] of packed cells ``h`` [n_cells, e], in group order.

        The label column of each group is its last block of ``rows`` cells. Cut with
        ``torch.split`` for the reason given at :meth:`DualAxisBlock._attend`.
        """
        sizes = [size for group in self.groups
                 for size in (group.stop - group.start - group.rows, group.rows)]
        return _join(list(_split(h, sizes)[1::2]))

    @staticmethod
    def of(batch: TaskBatch) -> _PackedLayout:
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
                labeled, task_rows, _ = sizes[task]
                slots.append(_TaskSlot(task, rows, task_rows, labeled, contexts[task]))
                rows += task_rows
            group = _Group(start, columns, rows, tuple(slots))
            groups.append(group)
            start = group.stop
        return _PackedLayout(tuple(groups), start)


class DualAxisBlock(nn.Module):
    """One transformer block: attention across features, across rows, feed-forward."""

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

    def forward(self, h: Tensor, layout: _PackedLayout, label_only: bool = False) -> Tensor:
        """h: packed cells [n_cells, e] -> [n_cells, e] (differentiable).

        With ``label_only`` the block returns its output at the label cells only, [n_rows, e]
        (see :meth:`_forward_label_cells`).
        """
        if label_only:
            return self._forward_label_cells(h, layout)
        out = self.attn_features.out
        h = self.norm_features(h + out(self._attend(self.attn_features.qkv(h), layout, "features")))
        out = self.attn_rows.out
        h = self.norm_rows(h + out(self._attend(self.attn_rows.qkv(h), layout, "rows")))
        return self.norm_ff(h + self.ff(h))

    def _forward_label_cells(self, h: Tensor, layout: _PackedLayout) -> Tensor:
        """The block's output at the label cells, [n_rows, e], computing nothing else.

        The decoder reads only the label cells of the last block, and in that block a label
        cell depends on: the keys and values of every cell of its row (attention across
        features), and then only on label cells (attention across rows runs within a column;
        the feed-forward is per cell). So the last block needs the key/value projection of all
        cells, and everything else for the label column alone — 1/(d+1) of the cells. Exactly
        the same function as the full block followed by picking the label cells; it saves
        ≈ 15 % of a forward (and backward) pass of the paper's 6-layer model.
        """
        e = h.shape[1]
        heads = self.attn_features.num_heads
        weight, bias = self.attn_features.qkv.weight, self.attn_features.qkv.bias
        key_value = F.linear(h, weight[e:], bias[e:])  # [n_cells, 2e]
        label = layout.label_cells(h)  # [n_rows, e]
        query = F.linear(label, weight[:e], bias[:e])
        attended = []
        cells = _split(key_value, layout.group_cells)
        queries = _split(query, [group.rows for group in layout.groups])
        for group, kv, q in zip(layout.groups, cells, queries, strict=True):
            k, v = (  # [rows, H, columns, dh]
                t.permute(1, 2, 0, 3)
                for t in kv.view(group.columns, group.rows, 2, heads, e // heads).unbind(2)
            )
            q = q.view(group.rows, heads, 1, e // heads)
            attended.append(F.scaled_dot_product_attention(q, k, v).reshape(group.rows, e))
        label = self.norm_features(label + self.attn_features.out(_join(attended)))
        column = layout.label_column()
        out = self.attn_rows.out
        label = self.norm_rows(label + out(self._attend(self.attn_rows.qkv(label), column, "rows")))
        return self.norm_ff(label + self.ff(label))

    def _attend(self, qkv: Tensor, layout: _PackedLayout, axis: str) -> Tensor:
        """Attention along ``axis`` from packed q/k/v [n, 3e] -> packed [n, e].

        The per-group and per-task pieces are cut with ``torch.split``, whose backward
        concatenates the pieces' gradients once; indexing each piece instead would make
        autograd build a zero-filled gradient of the whole matrix per piece.
        """
        e = qkv.shape[1] // 3
        parts = []
        for group, block in zip(layout.groups, _split(qkv, layout.group_cells), strict=True):
            block = block.view(group.columns, group.rows, 3 * e)
            if axis == "features":
                parts.append(attend_features(block, self.attn_features.num_heads))
                continue
            task_blocks = _split(block, [slot.rows for slot in group.slots], dim=1)
            pieces = [
                _attend_within_columns(task_block, self.attn_rows.num_heads, slot.context)
                for slot, task_block in zip(group.slots, task_blocks, strict=True)
            ]
            parts.append(pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1))
        return _join([part.reshape(-1, e) for part in parts])

    def forward_inference(self, h: Tensor, layout: _PackedLayout, work: _Workspace) -> Tensor:
        """The same function as :meth:`forward` for inference, with fewer passes and buffers.

        On CPU, passes over the [n_cells, e] matrices cost about as much as the matrix
        products, and every freshly allocated large tensor costs page faults. So: the big
        products write into reused workspace buffers, and ``h.addmm_(a, W.T)`` accumulates
        the output projection straight into the residual stream. Two biases are folded away
        exactly: softmax ignores the key bias (it adds the same q·b_k to all scores of a
        query), and the value bias passes through the attention unchanged (weights sum to 1),
        so it joins the output bias as W_o·b_v. ``h`` is overwritten.
        """
        e = h.shape[1]
        for attention, norm, axis in (
            (self.attn_features, self.norm_features, "features"),
            (self.attn_rows, self.norm_rows, "rows"),
        ):
            weight, bias = attention.qkv.weight, attention.qkv.bias
            torch.mm(h, weight.t(), out=work.qkv)
            work.qkv[:, :e].add_(bias[:e])
            attended = self._attend(work.qkv, layout, axis)
            output_bias = torch.addmv(attention.out.bias, attention.out.weight, bias[2 * e :])
            h.addmm_(attended, attention.out.weight.t()).add_(output_bias)
            del attended
            h = norm(h)
        first, second = self.ff[0], self.ff[2]
        torch.addmm(first.bias, h, first.weight.t(), out=work.hidden)
        torch.ops.aten.gelu_(work.hidden)
        h.addmm_(work.hidden, second.weight.t()).add_(second.bias)
        return self.norm_ff(h)


class _Workspace:
    """Buffers reused by every block of one inference forward pass."""

    def __init__(self, n_cells: int, embed_dim: int, ff_dim: int, like: Tensor) -> None:
        self.qkv = torch.empty(n_cells, 3 * embed_dim, dtype=like.dtype, device=like.device)
        self.hidden = torch.empty(n_cells, ff_dim, dtype=like.dtype, device=like.device)


def _autocast_active(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4 has no device argument
        if device_type == "cpu":
            return bool(torch.is_autocast_cpu_enabled())
        return bool(torch.is_autocast_enabled())


def _join(parts: list[Tensor]) -> Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _split(tensor: Tensor, sizes: list[int], dim: int = 0) -> tuple[Tensor, ...]:
    return (tensor,) if len(sizes) == 1 else torch.split(tensor, sizes, dim=dim)


class PUICLModel(nn.Module):
    """The PUICL transformer; ``forward(batch)`` -> logits float32 ``[B, R, 2]``.

    Column 0 of the logits is the negative class, column 1 the positive class. Rows are
    those of ``batch.x``; only the unlabeled rows of each task are meaningful (the labeled
    rows get finite values, padded rows exactly zero).

    ``activation_checkpointing = True`` recomputes each block during the backward pass
    instead of storing its activations (about 10× less activation memory for ~1.3× the
    compute); it has no effect without gradients. ``prune_last_block = False`` makes the last
    block compute every cell like the others (same outputs, ≈ 15 % more work: for
    measurements and tests).
    """

    def __init__(self, config: ModelConfig | None = None) -> None:
        super().__init__()
        config = config if config is not None else ModelConfig()
        config.validate()
        self.config = config
        e = config.embed_dim
        self.feature_encoder = nn.Linear(1, e)
        self.target_encoder = nn.Linear(1, e)
        self.unlabeled_token = nn.Parameter(torch.empty(e))
        nn.init.normal_(self.unlabeled_token, std=0.02)
        self.blocks = nn.ModuleList(
            DualAxisBlock(e, config.num_heads, config.ff_dim) for _ in range(config.num_layers)
        )
        self.decoder = nn.Sequential(
            nn.Linear(e, config.ff_dim), nn.GELU(), nn.Linear(config.ff_dim, 2)
        )
        self.activation_checkpointing = False
        self.prune_last_block = True

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per part: encoders, blocks, decoder and total."""

        def count(*modules: nn.Module | nn.Parameter) -> int:
            total = 0
            for module in modules:
                params = [module] if isinstance(module, nn.Parameter) else module.parameters()
                total += sum(p.numel() for p in params)
            return total

        counts = {
            "encoders": count(self.feature_encoder, self.target_encoder, self.unlabeled_token),
            "blocks": count(self.blocks),
            "decoder": count(self.decoder),
        }
        counts["total"] = sum(counts.values())
        return counts

    def _embed(self, batch: TaskBatch, layout: _PackedLayout) -> Tensor:
        """Packed cell embeddings [n_cells, e] (column-major per group, label column last)."""
        clip = self.config.feature_clip
        weight = self.feature_encoder.weight[:, 0]
        bias = self.feature_encoder.bias
        # Linear(1, e) applied to the label scalar, written out so autocast leaves it fp32.
        labeled_embedding = self.target_encoder.weight[:, 0] * LABELED_VALUE
        labeled_embedding = labeled_embedding + self.target_encoder.bias
        pieces = []
        for group in layout.groups:
            features = group.columns - 1
            z = _join([
                standardize_features(
                    batch.x[slot.task, : slot.rows, :features].float(), slot.labeled, clip
                )
                for slot in group.slots
            ])  # [rows, features]
            cells = torch.addcmul(bias, z.t().unsqueeze(-1), weight)  # [features, rows, e]
            label = _join([
                part
                for slot in group.slots
                for part in (
                    labeled_embedding.expand(slot.labeled, -1),
                    self.unlabeled_token.expand(slot.rows - slot.labeled, -1),
                )
            ])
            pieces.append(torch.cat([cells, label.unsqueeze(0)]).view(-1, cells.shape[-1]))
        return _join(pieces)

    def forward(self, batch: TaskBatch) -> Tensor:
        batch.validate()
        layout = _PackedLayout.of(batch)
        h = self._embed(batch, layout)
        # Inference (no autograd, no autocast: the buffers are fp32) takes the allocation-free
        # path; training, and autocast whose ops mix dtypes, the plain differentiable one. The
        # last block computes the label cells only (DualAxisBlock._forward_label_cells).
        inner = list(self.blocks)
        last = inner.pop() if self.prune_last_block else None  # None: every block in full
        checkpointing = self.activation_checkpointing and torch.is_grad_enabled()
        if torch.is_grad_enabled() or _autocast_active(h.device.type):
            for block in inner:
                h = checkpoint(block, h, layout, use_reentrant=False) if checkpointing else (
                    block(h, layout))
        else:
            config = self.config
            work = _Workspace(layout.n_cells, config.embed_dim, config.ff_dim, like=h)
            for block in inner:
                h = block.forward_inference(h, layout, work)
            del work
        if last is None:
            label_cells = layout.label_cells(h)
        elif checkpointing:
            label_cells = checkpoint(last, h, layout, True, use_reentrant=False)
        else:
            label_cells = last(h, layout, label_only=True)
        logits = self.decoder(label_cells).float()

        batch_size, max_rows = batch.x.shape[0], batch.x.shape[1]
        slots = [slot for group in layout.groups for slot in group.slots]
        if len(slots) == 1 and slots[0].rows == max_rows:
            return logits.view(1, max_rows, 2)
        task_index = torch.cat(
            [torch.full((slot.rows,), slot.task, dtype=torch.int64) for slot in slots]
        ).to(h.device)
        row_index = torch.cat([torch.arange(slot.rows) for slot in slots]).to(h.device)
        out = logits.new_zeros(batch_size, max_rows, 2)
        return out.index_put((task_index, row_index), logits)
