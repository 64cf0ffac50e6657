"""Scoring new rows over a cached context: the fixed-shape query path.

A new row is scored as a *query row* of a fitted pass (:mod:`puicl_model.passes.planning`): it
attends to the pass's context rows (its labeled subset and pool chunk) and to itself, and no
row attends to it (the specification's rule, :mod:`puicl_model.net.specification`). So the context
is the same whatever new rows are scored: its keys and values at every row attention are
computed once (:func:`context_cache`), and the new rows are then scored in blocks of a fixed
number of rows (:func:`query_probabilities`, the last block padded).

Why a path of its own: scoring query rows inside a forward pass over context and queries
together gives each row a result that depends, in its last bits, on how many rows share the
pass and where the row sits among them (the matrix products change shape, and a masked
attention sums a row's own term at another place). Here every product has one shape for a
given context, and the row's own term is added after the context's, so a row's probability is
the same bytes whatever rows it is scored with, in whatever order, in however many calls: what
scoring a table in batches, or on several machines, needs (docs/classifier.md, "Large
tables"). It agrees with the specification to float32 rounding
(``tests/model/test_query_rows.py``).

Computed in float32 on any device, without autocast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from puicl_model.net.model import DualAxisBlock, PUICLModel, SelfAttention
from puicl_model.net.standardization import LABELED_VALUE, STD_FLOOR_ABSOLUTE, STD_FLOOR_RELATIVE
from puicl_model.passes.inference import ViewRows, threads
from puicl_model.passes.phases import describe, report
from puicl_model.passes.planning import PassPlanner

__all__ = ["QUERY_BLOCK_ROWS", "ContextCache", "context_cache", "query_probabilities",
           "score_new_rows"]

# Query rows per forward: every block has this many rows (the last one padded). Large enough
# that the products run at full speed, small enough that a block's attention scores
# ([columns, heads, rows, context rows] floats, ~60 MB next to a 1,300-row context with 20
# features) stay small.
QUERY_BLOCK_ROWS = 128


@dataclass(frozen=True)
class ContextCache:
    """What query rows read of one pass's context: the labeled rows' feature statistics, and
    the keys and values of the context's cells at each block's attention across rows
    (``[columns, heads, rows, head_dim]``; the last block's at the label column only)."""

    mean: Tensor  # [d]
    scale: Tensor  # [d]
    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]


def _heads(t: Tensor, num_heads: int) -> Tensor:
    """[rows, columns, e] -> [columns, heads, rows, head_dim]."""
    rows, columns, e = t.shape
    return t.view(rows, columns, num_heads, e // num_heads).permute(1, 2, 0, 3)


def _merge_heads(t: Tensor) -> Tensor:
    """[columns, heads, rows, head_dim] -> [rows, columns, e]."""
    columns, heads, rows, head_dim = t.shape
    return t.permute(2, 0, 1, 3).reshape(rows, columns, heads * head_dim)


def _attend_features(attention: SelfAttention, h: Tensor, queries: Tensor | None = None) -> Tensor:
    """Attention across the cells of each row: h [rows, columns, e] -> [rows, columns', e]
    (at ``queries`` [rows, columns', e] only, where given)."""
    e = h.shape[-1]
    heads = attention.num_heads
    queries = h if queries is None else queries
    q = F.linear(queries, attention.qkv.weight[:e], attention.qkv.bias[:e])
    k, v = F.linear(h, attention.qkv.weight[e:], attention.qkv.bias[e:]).chunk(2, dim=-1)
    # [rows, heads, columns, head_dim]: rows are the batch, so each row is attended on its own
    q, k, v = (t.unflatten(-1, (heads, e // heads)).transpose(1, 2) for t in (q, k, v))
    if q.shape[2] == k.shape[2]:
        out = F.scaled_dot_product_attention(q, k, v)
    else:
        # written out: with one query per row, scaled_dot_product_attention's result depends
        # on the row's place in the batch (in the last bits)
        weights = torch.softmax((q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2), dim=-1)
        out = weights @ v
    return attention.out(out.transpose(1, 2).flatten(2))


def _embed(model: PUICLModel, z: Tensor, labeled_rows: int) -> Tensor:
    """Cells [rows, d + 1, e] of standardized features ``z`` [rows, d]; the first
    ``labeled_rows`` rows are labeled, the others unlabeled."""
    features = model.embed_features(z)
    labeled = model.target_encoder.weight[:, 0] * LABELED_VALUE + model.target_encoder.bias
    label = model.unlabeled_token.expand(z.shape[0], -1).clone()
    label[:labeled_rows] = labeled
    return torch.cat([features, label.unsqueeze(1)], dim=1)


def _feed_forward(block: DualAxisBlock, h: Tensor) -> Tensor:
    return block.norm_ff(h + block.ff(h))


@torch.inference_mode()
def context_cache(model: PUICLModel, x: Tensor, n_labeled: int) -> ContextCache:
    """The cache of one pass's context ``x`` [rows, d] (float32; its first ``n_labeled``
    rows labeled): its rows attend to one another, as in a transductive pass."""
    x = x.float()
    labeled = x[:n_labeled]
    var, mean = torch.var_mean(labeled, dim=0, correction=0)
    scale = torch.maximum(var.sqrt(), mean.abs() * STD_FLOOR_RELATIVE + STD_FLOOR_ABSOLUTE)
    clip = model.config.feature_clip
    h = _embed(model, ((x - mean) / scale).clamp(-clip, clip), n_labeled)
    keys, values = [], []
    *inner, last = model.blocks
    for block in inner:
        h = block.norm_features(h + _attend_features(block.attn_features, h))
        q, k, v = (_heads(t, block.attn_rows.num_heads)
                   for t in block.attn_rows.qkv(h).chunk(3, dim=-1))
        keys.append(k.contiguous())
        values.append(v.contiguous())
        h = block.norm_rows(h + block.attn_rows.out(_merge_heads(
            F.scaled_dot_product_attention(q, k, v))))
        h = _feed_forward(block, h)
    # the last block: its attention across rows reads the label cells only
    label = h[:, -1:]
    label = last.norm_features(label + _attend_features(last.attn_features, h, label))
    _, k, v = (_heads(t, last.attn_rows.num_heads)
               for t in last.attn_rows.qkv(label).chunk(3, dim=-1))
    keys.append(k.contiguous())
    values.append(v.contiguous())
    return ContextCache(mean, scale, tuple(keys), tuple(values))


def _attend_rows(attention: SelfAttention, h: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """Query cells h [rows, columns, e] attend, per column, to the context's ``keys`` and
    ``values`` [columns, heads, context rows, head_dim] and to themselves."""
    q, k_self, v_self = (_heads(t, attention.num_heads) for t in attention.qkv(h).chunk(3, -1))
    scale = q.shape[-1] ** -0.5
    scores = torch.matmul(q, keys.transpose(-1, -2)).mul_(scale)  # [c, H, rows, context]
    own = (q * k_self).sum(-1, keepdim=True).mul_(scale)  # [c, H, rows, 1]
    top = torch.maximum(scores.amax(-1, keepdim=True), own)
    weights = scores.sub_(top).exp_()
    own_weight = (own - top).exp_()
    # the row's own term joins after the context's sum, so that its place never changes
    total = weights.sum(-1, keepdim=True) + own_weight
    out = (torch.matmul(weights, values) + own_weight * v_self) / total
    return attention.out(_merge_heads(out))


@torch.inference_mode()
def _query_logits(model: PUICLModel, cache: ContextCache, x: Tensor) -> Tensor:
    """Logits [rows, 2] of query rows ``x`` [rows, d] (float32) next to the cached context."""
    clip = model.config.feature_clip
    h = _embed(model, ((x - cache.mean) / cache.scale).clamp(-clip, clip), 0)
    *inner, last = model.blocks
    for block, keys, values in zip(inner, cache.keys, cache.values, strict=False):
        h = block.norm_features(h + _attend_features(block.attn_features, h))
        h = block.norm_rows(h + _attend_rows(block.attn_rows, h, keys, values))
        h = _feed_forward(block, h)
    label = h[:, -1:]
    label = last.norm_features(label + _attend_features(last.attn_features, h, label))
    label = last.norm_rows(label + _attend_rows(last.attn_rows, label, cache.keys[-1],
                                                cache.values[-1]))
    return model.decoder(_feed_forward(last, label)[:, 0]).float()


def query_probabilities(model: PUICLModel, cache: ContextCache, x: Tensor,
                        block_rows: int = QUERY_BLOCK_ROWS) -> Tensor:
    """P(y = +) [rows] of query rows ``x`` [rows, d] next to the cached context, scored in
    blocks of exactly ``block_rows`` rows (the last padded with zero rows, discarded)."""
    x = x.float()
    n = x.shape[0]
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    for start in range(0, n, block_rows):
        block = x[start : start + block_rows]
        size = block.shape[0]
        if size < block_rows:
            block = torch.cat([block, block.new_zeros(block_rows - size, block.shape[1])])
        logits = _query_logits(model, cache, block)
        out[start : start + size] = torch.softmax(logits, dim=-1)[:size, 1]
    return out


def score_new_rows(model: PUICLModel, views: Sequence[ViewRows],
                   planners: Sequence[PassPlanner], device: torch.device | str = "cpu",
                   n_threads: int | None = None, progress: bool | None = None) -> np.ndarray:
    """Mean over members of each member's mean P(y = +) over its passes, per new row (the
    views' ``new`` rows): the query rows of every planner's contexts
    (:meth:`~puicl_model.passes.planning.PassPlanner.new_row_contexts`), averaged as
    :func:`puicl_model.passes.inference.run_passes` averages pool rows. ``progress``: a tqdm bar
    over the contexts (None: on a terminal)."""
    from tqdm.auto import tqdm

    contexts = [(planner, item) for planner in planners
                for item in planner.new_row_contexts(views[planner.view].new)]
    n_new = len(views[0].new)
    total = {planner.member: np.zeros(n_new) for planner in planners}
    count = {planner.member: np.zeros(n_new, dtype=np.int64) for planner in planners}
    show = progress if progress is not None else sys.stderr.isatty() and len(contexts) > 4
    name = describe(f"PUICL: scoring {n_new:,} new rows")
    with threads(n_threads), tqdm(contexts, unit="context", desc=name, leave=False,
                                  disable=not show) as bar:
        for done, (planner, item) in enumerate(bar, start=1):
            view = views[planner.view]
            context = np.concatenate([view.labeled[item.labeled], view.pool[item.pool]])
            cache = context_cache(model, torch.from_numpy(context[:, item.features]).to(device),
                                  len(item.labeled))
            queries = torch.from_numpy(view.new[item.new][:, item.features]).to(device)
            proba = query_probabilities(model, cache, queries).cpu().numpy()
            np.add.at(total[planner.member], item.new, proba)
            np.add.at(count[planner.member], item.new, 1)
            report(done, len(contexts))  # the current phase hears how far its contexts are
    if any((scored == 0).any() for scored in count.values()):
        raise RuntimeError("internal error: some new rows were not scored by every member")
    # (one member: its own mean, bit for bit)
    return np.mean([total[m] / count[m] for m in sorted(total)], axis=0)
