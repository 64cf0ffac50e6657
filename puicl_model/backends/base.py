"""What a backend provides: a layout of one batch's cells and the attention over it.

The model (:mod:`puicl_model.model`) is written once against this interface. A backend decides
how the cells of a batch of tasks of different sizes are stored as one ``[n, E]`` matrix
(``h``), and how attention runs across the features of a row and across the rows of a column
of that matrix; everything else in a block (projections, layer norms, the feed-forward) is
per cell and does not care.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from puicl_model.batch import TaskBatch

__all__ = ["CellLayout", "embed_features", "join", "split"]


def embed_features(z: Tensor, feature_encoder: nn.Linear, group: int) -> Tensor:
    """Feature tokens of standardized values ``z`` [..., d] -> [..., ceil(d / group), e].

    ``group`` consecutive features form one token (the last zero-padded), embedded by
    ``feature_encoder`` = Linear(group, e); with ``group`` 1 this is one cell per feature.
    """
    if group == 1:  # Linear(1, e) written out: one fused multiply-add per cell
        return torch.addcmul(feature_encoder.bias, z.unsqueeze(-1), feature_encoder.weight[:, 0])
    d = z.shape[-1]
    tokens = -(-d // group)
    z = torch.nn.functional.pad(z, (0, tokens * group - d))
    return feature_encoder(z.view(*z.shape[:-1], tokens, group))


def join(parts: list[Tensor]) -> Tensor:
    """``torch.cat`` that returns a single part as it is."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def split(tensor: Tensor, sizes: list[int], dim: int = 0) -> tuple[Tensor, ...]:
    """``torch.split``, whose backward concatenates the pieces' gradients once; indexing each
    piece instead would make autograd build a zero-filled gradient of the whole per piece."""
    return (tensor,) if len(sizes) == 1 else torch.split(tensor, sizes, dim=dim)


class CellLayout:
    """The cells of one batch, stored as the rows of a matrix ``h`` [n, E]."""

    def embed(self, batch: TaskBatch, feature_encoder: nn.Linear, target_encoder: nn.Linear,
              unlabeled_token: Tensor, clip: float, thinking: Tensor | None = None) -> Tensor:
        """The cells' embeddings (paper §3.1) in this layout's order, [n, E].

        ``thinking`` [k, 2, E]: the feature-cell and label-cell embedding of each of the k
        thinking rows the layout was built with (the first k rows of every task).
        """
        raise NotImplementedError

    def attend_features(self, qkv: Tensor, num_heads: int) -> Tensor:
        """Attention across the cells of each row: packed q/k/v [n, 3E] -> [n, E]."""
        raise NotImplementedError

    def attend_rows(self, qkv: Tensor, num_heads: int) -> Tensor:
        """Attention across the rows of each column: packed q/k/v [n, 3E] -> [n, E]."""
        raise NotImplementedError

    def label_cells(self, h: Tensor) -> Tensor:
        """The label cells [n, E] of every row (thinking rows too), as :meth:`scatter_rows`
        takes them."""
        raise NotImplementedError

    def scatter_rows(self, values: Tensor) -> Tensor:
        """Per-row values (one per label cell) -> [B, R, k] for the batch's own rows; padding
        rows are zero, thinking rows are dropped."""
        raise NotImplementedError

    def label_cells_after(self, block: nn.Module, h: Tensor) -> Tensor:
        """The label cells of ``block(h)``; a layout may compute only what they need."""
        return self.label_cells(block(h, self))
