"""Attention backends: how a batch's cells are laid out and attended, chosen by name.

==============  ====================================================================
``packed``      real cells only, packed; attention per shape group and per task,
                PyTorch's ``scaled_dot_product_attention`` (:mod:`.packed`). CPU.
``cpu_kernel``  ``packed``, with training's attentions in compiled kernels for heads of
                16 dimensions (:mod:`.cpu_kernel`); opt-in, built when chosen. CPU.
``bucketed``    tasks padded within shape buckets, a few large attention calls, no
                per-task loop and no host synchronisation (:mod:`.bucketed`). GPU.
``bucketed_matmul``  ``bucketed``, with the attention across features (sequences of
                d + 1 cells) as plain batched matrix products instead of the flash
                kernels (:func:`.bucketed.short_attention`). GPU.
``padded``      the batch's padded tensor as one block of a fixed shape, masks keeping
                each task to its own rows and features; no host read, no loop over the
                batch (:mod:`.padded`). The unit step's padded shapes (``trainer``).
``auto``        on a GPU ``bucketed_matmul`` for training and ``bucketed`` for
                inference; else ``packed``, and for training on CPU
                ``cpu_kernel`` where the one-off timing of :mod:`.calibration` found it
                faster on this CPU (the one rule: :func:`auto_backend`).
==============  ====================================================================

Backends differ in float rounding, so a training run resolves its backend once, records the
name, and keeps it on resume (``trainer``); a model left at ``auto`` takes the inference rule.
"""

from __future__ import annotations

import torch

from puicl_model.net.backends import calibration, cpu_kernel
from puicl_model.net.backends.base import CellLayout
from puicl_model.net.backends.bucketed import BucketedCells
from puicl_model.net.backends.packed import PackedCells
from puicl_model.net.backends.padded import PaddedCells
from puicl_model.net.batch import TaskBatch

__all__ = ["BACKENDS", "CellLayout", "auto_backend", "cell_layout", "resolve_backend"]

BACKENDS = ("auto", "packed", "cpu_kernel", "bucketed", "bucketed_matmul", "padded")


def auto_backend(device: torch.device, training: bool) -> str:
    """The backend ``auto`` stands for on ``device``. On CUDA: ``bucketed_matmul`` for training
    (on an H100, 1.31x the tasks/s of ``bucketed``, and two runs end with identical weights;
    docs/performance.md, "GPU"), ``bucketed`` for inference (the products were timed in training
    steps only). On CPU: for training, ``cpu_kernel`` where the calibration (timed once per
    CPU, compiler and thread count, then cached) found it faster than ``packed``; else
    ``packed``."""
    if device.type == "cuda":
        return "bucketed_matmul" if training else "bucketed"
    if training and device.type == "cpu":
        return "cpu_kernel" if calibration.kernel_is_faster() else "packed"
    return "packed"


def cell_layout(backend: str, batch: TaskBatch) -> CellLayout:
    """The layout of ``batch``'s cells under ``backend`` (``auto``: :func:`auto_backend`'s
    inference rule on the batch's device; the trainer resolves its backend beforehand)."""
    if backend == "auto":
        backend = auto_backend(batch.device, training=False)
    if backend == "packed":
        return PackedCells.of(batch)
    if backend == "cpu_kernel":
        cpu_kernel.load_kernel()  # built on the first call, then cached; raises if unavailable
        return PackedCells.of(batch, compiled_kernel=True)
    if backend == "bucketed":
        return BucketedCells(batch)
    if backend == "bucketed_matmul":
        return BucketedCells(batch, feature_products=True)
    if backend == "padded":
        return PaddedCells(batch)
    raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def resolve_backend(backend: str, device: torch.device, training: bool) -> str:
    """The concrete backend that ``backend`` means on ``device``.

    ``auto`` resolves by :func:`auto_backend`. ``cpu_kernel`` is built here, so that a missing
    compiler is reported when the backend is chosen
    (:class:`~puicl_model.net.backends.cpu_kernel.KernelUnavailable`).
    """
    if backend not in BACKENDS:
        raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}, "
                         f"got {backend!r}")
    if backend == "auto":
        return auto_backend(device, training)
    if backend == "cpu_kernel":
        if device.type != "cpu":
            raise ValueError(f"attention backend 'cpu_kernel' runs on CPU only, not {device}")
        cpu_kernel.load_kernel()
    return backend
