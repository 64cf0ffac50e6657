"""The last block computed only for the cells the decoder reads (packed layouts).

The decoder reads only the label cells of the last block, and in that block a label cell
depends on: the keys and values of every cell of its row (attention across features), and then
only on label cells (attention across rows runs within a column; the feed-forward is per cell).
So the last block needs the key/value projection of all cells, and everything else for the
label column alone — 1/(d+1) of the cells. It is exactly the same function as the full block
followed by picking the label cells (tested against the specification); it saves ≈ 15 % of a
forward and backward pass of the paper's 6-layer model on CPU (docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn.functional as F
from torch import Tensor, nn

from puicl_model.backends.base import join, split

if TYPE_CHECKING:
    from puicl_model.backends.packed import PackedCells

__all__ = ["label_cells_after_block"]


def label_cells_after_block(block: nn.Module, h: Tensor, cells: PackedCells) -> Tensor:
    """``cells.label_cells(block(h, cells))`` [n_rows, e], computing nothing else."""
    e = h.shape[1]
    attention = block.attn_features
    heads = attention.num_heads
    weight, bias = attention.qkv.weight, attention.qkv.bias
    # pre-norm attends over the normed cells and adds to the un-normed residual stream
    attended_cells = block.norm_features(h) if block.pre_norm else h
    key_value = F.linear(attended_cells, weight[e:], bias[e:])  # [n_cells, 2e]
    label = cells.label_cells(h)  # [n_rows, e]
    query_cells = cells.label_cells(attended_cells) if block.pre_norm else label
    query = F.linear(query_cells, weight[:e], bias[:e])
    attended = []
    queries = split(query, [group.rows for group in cells.groups])
    for group, kv, q in zip(cells.groups, split(key_value, cells.group_cells), queries,
                            strict=True):
        k, v = (  # [rows, H, columns, dh]
            t.permute(1, 2, 0, 3)
            for t in kv.view(group.columns, group.rows, 2, heads, e // heads).unbind(2)
        )
        q = q.view(group.rows, heads, 1, e // heads)
        attended.append(F.scaled_dot_product_attention(q, k, v).reshape(group.rows, e))
    attend_rows = cells.label_column().attend_rows
    if block.pre_norm:
        label = label + attention.out(join(attended))
        label = label + block.attn_rows(block.norm_rows(label), attend_rows)
        return label + block.ff(block.norm_ff(label))
    label = block.norm_features(label + attention.out(join(attended)))
    label = block.norm_rows(label + block.attn_rows(label, attend_rows))
    return block.norm_ff(label + block.ff(label))
