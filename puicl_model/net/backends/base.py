"""What a backend provides: a layout of one batch's cells and the attention over it.

The model (:mod:`puicl_model.net.model`) is written once against this interface. A backend decides
how the cells of a batch of tasks of different sizes are stored as one ``[n, E]`` matrix
(``h``), and how attention runs across the features of a row and across the rows of a column
of that matrix; everything else in a block (projections, layer norms, the feed-forward) is
per cell and does not care. The embedding of a cell is the model's; a layout only says where
each embedding goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from puicl_model.net.batch import TaskBatch

__all__ = ["CellLayout", "join", "split"]


def join(parts: list[Tensor]) -> Tensor:
    """``torch.cat`` that returns a single part as it is."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def split(tensor: Tensor, sizes: list[int], dim: int = 0) -> tuple[Tensor, ...]:
    """``torch.split``, whose backward concatenates the pieces' gradients once; indexing each
    piece instead would make autograd build a zero-filled gradient of the whole per piece."""
    return (tensor,) if len(sizes) == 1 else torch.split(tensor, sizes, dim=dim)


class CellLayout:
    """The cells of one batch, stored as the rows of a matrix ``h`` [n, E].

    (A layout may keep more leading dimensions, ``h`` [..., E], where that gives its products
    the shapes it needs: every step of a block outside the layout is per cell.
    :mod:`puicl_model.net.backends.cached_context` keeps ``[rows, columns, E]``.)"""

    def embed(self, batch: TaskBatch, embed_features: Callable[[Tensor], Tensor],
              labeled: Tensor, unlabeled: Tensor, clip: float) -> Tensor:
        """The cells' embeddings in this layout's order, [n, E].

        Each task's features standardized with its labeled rows' statistics and clipped to
        ``±clip`` (:mod:`puicl_model.net.standardization`), then ``embed_features`` (values [...]
        -> [..., E]); a label cell is ``labeled`` [E] for a labeled row, ``unlabeled`` [E]
        otherwise.
        """
        raise NotImplementedError

    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        """Attention across the cells of each row: packed q/k/v [n, 3E] -> [n, E]."""
        raise NotImplementedError

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        """Attention across the rows of each column: packed q/k/v [n, 3E] -> [n, E]."""
        raise NotImplementedError

    def label_cells(self, h: Tensor) -> Tensor:
        """The label cells [n_rows, E] of every row, in the order :meth:`scatter_rows` takes."""
        raise NotImplementedError

    def scatter_rows(self, values: Tensor) -> Tensor:
        """Per-row values (one per label cell) -> [B, R, k]; padding rows are zero."""
        raise NotImplementedError

    def label_column(self) -> CellLayout | None:
        """The layout of the label cells alone, for a block computed at those cells only
        (:meth:`DualAxisBlock.label_cells <puicl_model.net.model.DualAxisBlock.label_cells>`), or
        None where this layout computes every cell instead. A layout that returns one
        implements :meth:`attend_features_from_label_cells`."""
        return None

    def attend_features_from_label_cells(self, query: Tensor, key_value: Tensor,
                                         num_heads: int) -> Tensor:
        """Attention across the cells of each row with queries at the label cells only:
        ``query`` [n_rows, E] (:meth:`label_cells` order), ``key_value`` [n, 2E] -> [n_rows, E]."""
        raise NotImplementedError
