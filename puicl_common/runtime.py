"""Where and in which precision the model runs: device and autocast choices in one place.

The trainer (``--device``, ``training.precision``) and the classifier (``device=``,
``precision=``) accept the same words and mean the same by them:

* **device** ``auto``: a CUDA GPU if torch sees one; else, for inference only, Apple's GPU
  (MPS) where torch has it (training there is untested); else the CPU
  (:func:`resolve_device`).
* **precision** ``auto``: bfloat16 autocast on CUDA, float32 elsewhere; ``float32`` and
  ``bfloat16`` ask for one of them (:func:`resolve_precision`). Run configs written before
  these words were chosen spell them ``fp32`` and ``bf16``; the trainer still reads those
  (:data:`PRECISION_ALIASES`).
* **threads** (the classifier's ``n_threads``, the trainer's ``--threads``): a whole number
  from 1 to :data:`MAX_THREADS` (:func:`check_thread_count`), checked where it is set and
  again where it is used.

torch is imported on first use only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_THREADS", "PRECISIONS", "PRECISION_ALIASES", "autocast_active",
           "autocast_for", "check_thread_count", "resolve_device", "resolve_precision",
           "torch_threads"]

PRECISIONS = ("auto", "float32", "bfloat16")
# The most threads a setting may ask for. OpenMP starts every thread it is asked for, and far
# beyond the cores (10⁵ threads) the process dies in libgomp with a segfault or an abort that
# no Python error reports; torch takes no count above 2³¹. A fixed number, not a multiple of
# this machine's cores, so that a classifier saved with its n_threads on a large machine loads
# on a small one; well above the cores of any machine puicl runs on (a few hundred at most)
MAX_THREADS = 1024
# the trainer's former spellings, still read in run configs (which keep them in their hashes)
PRECISION_ALIASES = {"fp32": "float32", "bf16": "bfloat16"}


def resolve_device(preference: str, local_rank: int = 0, *, training: bool = True,
                   ) -> torch.device:
    """The device ``preference`` names (module docstring); ``cuda`` without a GPU fails.

    ``preference`` is ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``. Plain ``cuda`` picks
    the GPU of this process's ``local_rank`` (one GPU per process under torchrun). ``auto``
    takes MPS only when not ``training``. Any other name, and a GPU this machine lacks, is a
    ValueError in one line that lists the names that work here.
    """
    import torch

    if preference == "auto":
        if torch.cuda.is_available():
            preference = "cuda"
        elif not training and _mps_available():
            preference = "mps"
        else:
            preference = "cpu"
    try:
        device = torch.device(preference)
    except (RuntimeError, TypeError):
        device = None
    # torch names more device types than puicl runs on (xla, hpu, meta, ...): each fails later,
    # deep in torch; so does a GPU this machine lacks. Refused here, in one line that lists only
    # the names that work on this machine.
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be {_usable_devices()}, got {preference!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {preference!r} was asked for but torch sees no GPU here; "
                             f"use {_usable_devices()}")
        count = torch.cuda.device_count()
        if device.index is None:
            device = torch.device("cuda", local_rank % count)
        elif device.index >= count:
            raise ValueError(f"device {preference!r} was asked for but torch sees {count} GPU(s) "
                             f"here; use {_usable_devices()}")
    elif device.type == "mps" and not (_mps_available() and device.index in (None, 0)):
        raise ValueError(f"device {preference!r} was asked for but torch sees no Apple GPU "
                         f"(MPS) here; use {_usable_devices()}")
    elif device.type == "cpu" and device.index not in (None, 0):
        raise ValueError(f"device must be {_usable_devices()}, got {preference!r}")
    return device


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _usable_devices() -> str:
    """The device names that work on this machine, as a phrase."""
    import torch

    names = ["'auto'", "'cpu'"]
    if torch.cuda.is_available():
        names += ["'cuda'", f"'cuda:N' (N < {torch.cuda.device_count()})"]
    if _mps_available():
        names.append("'mps'")
    return ", ".join(names[:-1]) + " or " + names[-1]


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bfloat16`` on CUDA, ``float32`` elsewhere; ``float32`` and ``bfloat16``
    (or their aliases ``fp32`` and ``bf16``) name themselves."""
    precision = PRECISION_ALIASES.get(precision, precision)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return precision


def autocast_for(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast context of ``precision`` (after :func:`resolve_precision`) on ``device``."""
    import torch

    if resolve_precision(precision, device) == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def autocast_active(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` right now (any torch >= 2.3)."""
    import torch

    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4 has no device argument
        if device_type == "cpu":
            return bool(torch.is_autocast_cpu_enabled())
        return bool(torch.is_autocast_enabled())


def check_thread_count(value: Any, what: str = "n_threads") -> int | None:
    """``value`` as a count of threads (None stays None: as many as the library's default),
    or a ValueError in one line naming ``what``: a whole number (not a bool) from 1 to
    :data:`MAX_THREADS`."""
    import numpy as np

    if value is None:
        return None
    if (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            and 1 <= value <= MAX_THREADS):
        return int(value)
    raise ValueError(f"{what} must be a whole number from 1 to {MAX_THREADS}, or None, got "
                     f"{value!r:.40}")


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch threads (None: as they are), restoring the previous
    count after; a count :func:`check_thread_count` refuses raises its ValueError."""
    count = check_thread_count(count)
    if count is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
