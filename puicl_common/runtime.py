"""Where and in which precision the model runs: device and autocast choices in one place.

The trainer (``--device``, ``training.precision``) and the classifier (``device=``) accept the
same words and mean the same by them. torch is imported on first use only.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["PRECISIONS", "autocast_active", "autocast_for", "resolve_device", "resolve_precision"]

PRECISIONS = ("auto", "fp32", "bf16")


def resolve_device(preference: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> a GPU if torch sees one, else the CPU; ``cuda`` without a GPU fails.

    ``preference`` is ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``. Plain ``cuda`` picks
    the GPU of this process's ``local_rank`` (one GPU per process under torchrun).
    """
    import torch

    if preference == "auto":
        preference = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(preference)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got "
                         f"{preference!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {preference!r} was asked for but torch sees no GPU here; "
                             "use 'cpu' or 'auto'")
        if device.index is None:
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
    return device


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on CUDA, ``fp32`` elsewhere; ``fp32`` and ``bf16`` stay."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast_for(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast context of ``precision`` (after :func:`resolve_precision`) on ``device``."""
    import torch

    if resolve_precision(precision, device) == "bf16":
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
