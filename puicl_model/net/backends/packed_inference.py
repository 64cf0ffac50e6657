"""Inference on CPU with the packed layout: the model's one fused fast path.

On CPU, passes over the [n_cells, e] matrices cost about as much as the matrix products, and
every freshly allocated large tensor costs page faults. So for inference (no autograd, no
autocast) the blocks but the last run here, fused, instead of through
:meth:`DualAxisBlock.forward <puicl_model.net.model.DualAxisBlock.forward>`, whose steps they
repeat: the big products write into reused workspace buffers, and ``h.addmm_(a, W.T)``
accumulates the output projection straight into the residual stream. Two biases are folded
away exactly: softmax ignores the key bias (it adds the same q·b_k to all scores of a query),
and the value bias passes through the attention unchanged (weights sum to 1), so it joins the
output bias as W_o·b_v. Tested against the specification; measured in docs/performance.md
(Classifier). The last block runs as in the model's forward, at the label cells only.

:func:`inference_logits` is what callers use: this path where it applies, ``model(batch)``
elsewhere (gradients wanted, autocast on, a GPU, or the ``bucketed`` backend).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from puicl_common.runtime import autocast_active
from puicl_model.net.backends import auto_backend
from puicl_model.net.backends.packed import PackedCells
from puicl_model.net.batch import TaskBatch

if TYPE_CHECKING:
    from puicl_model.net.model import DualAxisBlock, PUICLModel

__all__ = ["inference_logits", "packed_inference_logits"]


class _Workspace:
    """Buffers reused by every block of one inference forward pass."""

    def __init__(self, n_cells: int, embed_dim: int, ff_dim: int, like: Tensor) -> None:
        self.qkv = torch.empty(n_cells, 3 * embed_dim, dtype=like.dtype, device=like.device)
        self.hidden = torch.empty(n_cells, ff_dim, dtype=like.dtype, device=like.device)


def _block(block: DualAxisBlock, h: Tensor, cells: PackedCells, work: _Workspace) -> Tensor:
    """``block(h, cells)`` without autograd; ``h`` is overwritten."""
    e = h.shape[1]
    for attention, norm, attend in (
        (block.attn_features, block.norm_features, cells.attend_features),
        (block.attn_rows, block.norm_rows, cells.attend_rows),
    ):
        weight, bias = attention.qkv.weight, attention.qkv.bias
        torch.mm(h, weight.t(), out=work.qkv)
        work.qkv[:, :e].add_(bias[:e])
        attended = attend(work.qkv, attention.num_heads)
        output_bias = torch.addmv(attention.out.bias, attention.out.weight, bias[2 * e :])
        h.addmm_(attended, attention.out.weight.t()).add_(output_bias)
        del attended
        h = norm(h)
    first, second = block.ff[0], block.ff[2]
    torch.addmm(first.bias, h, first.weight.t(), out=work.hidden)
    torch.ops.aten.gelu_(work.hidden)
    h.addmm_(work.hidden, second.weight.t()).add_(second.bias)
    return block.norm_ff(h)


def packed_inference_logits(model: PUICLModel, batch: TaskBatch) -> Tensor:
    """``model(batch)`` computed with the packed layout and reused buffers (no autograd)."""
    batch.validate()
    config = model.config
    cells = PackedCells.of(batch)
    h = model.embed(batch, cells)
    *inner, last = model.blocks
    work = _Workspace(cells.n_cells, config.embed_dim, config.ff_dim, like=h)
    for block in inner:
        h = _block(block, h, cells, work)
    del work
    # as in the model's forward: the last block at the label cells only
    logits = model.decoder(last.label_cells(h, cells)).float()
    return cells.scatter_rows(logits)


def inference_logits(model: PUICLModel, batch: TaskBatch) -> Tensor:
    """``model(batch)``, by :func:`packed_inference_logits` where that applies."""
    backend = model.attention
    if backend == "auto":
        backend = auto_backend(batch.device, training=False)
    applies = (
        not torch.is_grad_enabled()
        and batch.device.type == "cpu"
        and not autocast_active("cpu")
        and backend in ("packed", "cpu_kernel")
    )
    return packed_inference_logits(model, batch) if applies else model(batch)
