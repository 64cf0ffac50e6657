"""The packed layouts' part of the last block computed only at the label cells.

The decoder reads only the label cells of the last block, and in that block a label cell
depends on the keys and values of every cell of its row (attention across features), and then
only on label cells (attention across rows runs within a column; the feed-forward is per cell).
The block's side of this is :meth:`DualAxisBlock.label_cells
<puicl_model.net.model.DualAxisBlock.label_cells>`; what a layout must add is the attention across
features with queries at the label cells only, here for the packed layouts. It is exactly the
same function as the full block followed by picking the label cells (tested against the
specification); it saves ≈ 15 % of a forward and backward pass of the paper's 6-layer model on
CPU (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch.nn.functional as F
from torch import Tensor

from puicl_model.net.backends.base import join, split

__all__ = ["attend_features_from_label_cells"]


class PackedGroups(Protocol):
    """What this needs of a packed layout (``puicl_model.net.backends.packed.PackedCells``): its
    groups of tasks with one column count (``rows``, ``columns``) and each group's cells.
    Named by its parts, so that this module does not import the layout that imports it."""

    @property
    def groups(self) -> Sequence[Any]: ...

    @property
    def group_cells(self) -> list[int]: ...


def attend_features_from_label_cells(cells: PackedGroups, query: Tensor, key_value: Tensor,
                                     num_heads: int) -> Tensor:
    """Each row's label cell attends to the cells of its row: ``query`` [n_rows, e] (the
    label cells, group by group), ``key_value`` [n_cells, 2e] -> [n_rows, e]."""
    e = query.shape[1]
    attended = []
    queries = split(query, [group.rows for group in cells.groups])
    for group, kv, q in zip(cells.groups, split(key_value, cells.group_cells), queries,
                            strict=True):
        k, v = (  # [rows, H, columns, dh]
            t.permute(1, 2, 0, 3)
            for t in kv.view(group.columns, group.rows, 2, num_heads, e // num_heads).unbind(2)
        )
        q = q.view(group.rows, num_heads, 1, e // num_heads)
        attended.append(F.scaled_dot_product_attention(q, k, v).reshape(group.rows, e))
    return join(attended)
