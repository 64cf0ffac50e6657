"""Is the compiled CPU attention kernel faster than PyTorch's here? Timed once, then cached.

The kernels of :mod:`puicl_model.net.backends.cpu_kernel` were tuned on CPUs with AVX-512; on a
CPU without it they are several times slower than PyTorch's ``scaled_dot_product_attention``
(docs/performance.md). So ``auto`` takes the kernel for training only where it was measured
faster *on this CPU*: the first time the question is asked, both compute the attentions of a
paper-sized training task (forward and backward, across rows and across features),
alternately, and the verdict is stored next to the compiled library — whose cache key already
names the CPU, the compiler and the source — per torch thread count. Later runs read the
verdict, so a timing never switches a run's backend midway: the trainer resolves ``auto``
once, at the start of a run, and records the result.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from puicl_common.atomic import atomic_write_json
from puicl_model.net.backends import cpu_kernel
from puicl_model.net.backends.packed import attend_sdpa_features, attend_sdpa_rows

__all__ = ["MARGIN", "Verdict", "kernel_is_faster", "measure", "verdict_path"]

# The kernel must be this much faster to be chosen: a near-tie is not worth the rounding change.
MARGIN = 0.95
# One training task of the paper's model: 8 heads of 16 dimensions, 10 features + label, 256 rows.
_COLUMNS, _ROWS, _HEADS = 11, 256, 8
_REPEATS = 5

Verdict = dict  # {"kernel_seconds", "sdpa_seconds", "kernel_faster", "threads", "shape"}


def verdict_path(library: Path, threads: int) -> Path:
    return library.with_name(f"{library.stem}.calibration-{threads}threads.json")


def _time_pass(attend_rows: Callable, attend_features: Callable, qkv: Tensor) -> float:
    start = time.perf_counter()
    leaf = qkv.detach().requires_grad_()
    out = attend_rows(leaf, _HEADS).sum() + attend_features(leaf, _HEADS).sum()
    out.backward()
    return time.perf_counter() - start


def measure() -> Verdict:
    """Time the kernel against PyTorch's attention, alternately (the kernel must be loaded)."""
    generator = torch.Generator().manual_seed(0)
    qkv = torch.randn(_COLUMNS, _ROWS, 3 * _HEADS * cpu_kernel.HEAD_DIM, generator=generator)
    candidates = {
        "kernel": (cpu_kernel.attend_rows, cpu_kernel.attend_features),
        "sdpa": (lambda q, h: attend_sdpa_rows(q, h, q.shape[1]), attend_sdpa_features),
    }
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for repeat in range(_REPEATS + 1):
        for name, (rows, features) in candidates.items():
            seconds = _time_pass(rows, features, qkv)
            if repeat:  # the first round warms up caches and allocators
                times[name].append(seconds)
    kernel, sdpa = (statistics.median(times[name]) for name in ("kernel", "sdpa"))
    return {
        "kernel_seconds": kernel, "sdpa_seconds": sdpa, "kernel_faster": kernel < MARGIN * sdpa,
        "threads": torch.get_num_threads(), "shape": [_COLUMNS, _ROWS, _HEADS],
    }


def kernel_is_faster() -> bool:
    """Whether training on this CPU should use the compiled kernel (module docstring).

    False where the kernel cannot be built (no compiler): ``packed`` needs none.
    """
    try:
        library = cpu_kernel.load_kernel()
    except cpu_kernel.KernelUnavailable:
        return False
    path = verdict_path(library, torch.get_num_threads())
    try:
        return bool(json.loads(path.read_text())["kernel_faster"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not measured yet (or a damaged file): measure now
    verdict = measure()
    atomic_write_json(path, verdict)
    return bool(verdict["kernel_faster"])
