"""A unit's micro-batch through the model to its per-task losses: eagerly, or one graph per
padded shape (``training.unit_graphs``).

* ``none``: the model's forward (the model compiled as a whole under ``training.compile``),
  then the loss: :func:`trainer.loss.masked_task_loss` for padded shapes (``unit_shapes``),
  else :func:`trainer.loss.per_task_loss`.
* ``compile``: the forward over the padded layout and the masked loss, under ``torch.compile``
  with static shapes: one compiled graph, forward and backward, for each padded shape met
  (the recompile limit is raised to the number of shapes the config allows).
* ``cuda_graphs``: the same function captured per shape as a CUDA graph, forward and backward
  (``torch.cuda.make_graphed_callables``), replayed for every later micro-batch of that
  shape: one launch for the whole forward and one for the backward. Captured the first time a
  shape is met, each in a memory pool of its own (a shared pool is safe only for graphs
  replayed in their capture order); at most :data:`MAX_GRAPHS` are kept, the least recently
  replayed dropped first (a stage meets 14-21 of the default shapes: speed/unit_shapes.py).
  Captured while holding :attr:`UnitForward.capture_guard`: no other
  thread may call CUDA during a capture, and the trainer's loader thread holds the same lock
  while it prepares a step (pinning host memory calls CUDA). Needs CUDA.

The graphs run the ``padded`` layout directly (:class:`puicl_model.net.backends.padded.
PaddedCells`): every tensor's shape is the padded shape's, no size is read back to the host,
and no Python branch depends on the tasks, so one shape is one fixed sequence of kernels.
Prepared for a GPU and checked on CPU (``compile``, against the eager step); the CUDA graphs
have not run on a GPU yet.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import Tensor, nn

from puicl_common.runtime import resolve_precision
from puicl_model.net.backends.padded import PaddedCells
from puicl_model.net.batch import TaskBatch
from puicl_model.net.model import PUICLModel
from trainer.batching import MicroBatch
from trainer.config import TrainingConfig
from trainer.loss import masked_task_loss, per_task_loss

__all__ = ["MAX_GRAPHS", "ShapeLoss", "UnitForward"]

# captured CUDA graphs kept at once: each holds the memory of its shape's forward and backward
MAX_GRAPHS = 24


def _autocast(precision: str, device: torch.device, cache: bool = True) -> Callable[
        [], contextlib.AbstractContextManager]:
    """The training precision's autocast; a CUDA graph's must not cache its casts."""
    if resolve_precision(precision, device) != "bfloat16":
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                                  cache_enabled=cache)


class ShapeLoss(nn.Module):
    """The per-task losses [B] of a padded micro-batch given as tensors, over the padded
    layout: what one graph per shape computes."""

    def __init__(self, model: PUICLModel, autocast: Callable[[], contextlib.AbstractContextManager]
                 ) -> None:
        super().__init__()
        self.model = model
        self.autocast = autocast

    def forward(self, x: Tensor, n_labeled: Tensor, n_rows: Tensor, n_features: Tensor,
                targets: Tensor, unlabeled: Tensor) -> Tensor:
        # sizes were checked when the micro-batch was collated: no validate(), which reads
        # them back to the host
        batch = TaskBatch(x=x, n_labeled=n_labeled, n_rows=n_rows, n_features=n_features)
        with self.autocast():
            cells = PaddedCells(batch)
            logits = self.model.cell_logits(self.model.embed(batch, cells), cells)
        return masked_task_loss(logits, targets, unlabeled)


def _inputs(micro: MicroBatch) -> tuple[Tensor, ...]:
    batch = micro.batch
    return (batch.x, batch.n_labeled, batch.n_rows, batch.n_features, micro.targets,
            micro.unlabeled)


class UnitForward:
    """Calls as ``forward(micro)`` -> per-task losses [B] (float32, with their graph), for a
    micro-batch already on the device (module docstring)."""

    def __init__(self, model: PUICLModel, module: nn.Module, training: TrainingConfig,
                 device: torch.device) -> None:
        self.model, self.module = model, module
        self.mode = training.unit_graphs
        self.padded = training.unit_shapes is not None
        self.device = device
        self.precision = training.precision
        self.autocast = _autocast(training.precision, device)
        self._graphs: OrderedDict[tuple[int, ...], Callable[..., Tensor]] = OrderedDict()
        self.capture_guard = threading.Lock()  # held while a CUDA graph is captured
        if self.mode == "cuda_graphs" and device.type != "cuda":
            raise ValueError("training.unit_graphs: cuda_graphs needs a CUDA device, not "
                             f"{device}; use compile or none")
        if self.mode == "compile":
            shapes = training.unit_shapes
            allowed = len(shapes.rows) * len(shapes.features) * training.micro_batch_size
            # one graph per (tasks, rows, features) met; the rows beyond the last listed
            # size add shapes of their own
            limit = torch._dynamo.config
            limit.recompile_limit = max(limit.recompile_limit, 2 * allowed)
            # fullgraph: a break in the padded path would split a shape's kernels again
            self._compiled = torch.compile(ShapeLoss(model, self.autocast), dynamic=False,
                                           fullgraph=True)

    def __call__(self, micro: MicroBatch) -> Tensor:
        if self.mode == "none":
            with self.autocast():
                logits = self.module(micro.batch)
            if self.padded:
                return masked_task_loss(logits, micro.targets, micro.unlabeled)
            return per_task_loss(logits, micro.targets, micro.unlabeled, micro.index)
        if self.mode == "compile":
            return self._compiled(*_inputs(micro))
        return self._graph_of(micro)(*_inputs(micro))

    def _graph_of(self, micro: MicroBatch) -> Callable[..., Tensor]:
        key = tuple(micro.batch.x.shape)
        graph = self._graphs.get(key)
        if graph is not None:
            self._graphs.move_to_end(key)
        else:
            if len(self._graphs) >= MAX_GRAPHS:
                self._graphs.popitem(last=False)  # its pool goes with it
            # captured on this micro-batch; its warm-up passes use torch.autograd.grad, so no
            # parameter's gradient is touched before the real pass below
            shape_loss = ShapeLoss(self.model, _autocast(self.precision, self.device, cache=False))
            with self.capture_guard:
                graph = torch.cuda.make_graphed_callables(shape_loss, _inputs(micro))
            self._graphs[key] = graph
        return graph

    @property
    def shapes(self) -> int:
        """How many shapes have a CUDA graph."""
        return len(self._graphs)
