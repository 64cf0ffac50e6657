"""Deterministic kernels on CUDA (``training.deterministic``), and the one-line error when an
operation has none.

On a GPU, several of PyTorch's kernels are non-deterministic by default: flash and
memory-efficient attention's backward passes accumulate with atomics, and cuBLAS may split a
product over a workspace shared between streams. Two identical runs then end with different
weights, and so does a resumed run (measured on one H100: docs/performance.md, "GPU"). Strict
deterministic mode makes PyTorch take the deterministic variant of every kernel that has one,
and raise on any that has none. The trainer turns it on when a segment starts on CUDA, before
the model is put on the device, in every process:

* ``torch.use_deterministic_algorithms(True)`` (strict: never ``warn_only``, which would let a
  non-deterministic kernel run with only a warning);
* ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, which cuBLAS reads when the process creates its handle
  (a value the user set already that cuBLAS accepts as deterministic is kept).

On CPU the key changes nothing: the CPU kernels the model uses are deterministic already
(tested: a resumed run equals an uninterrupted one), and strict mode would only add the
filling of every new tensor's memory.

An operation without a deterministic kernel raises a ``RuntimeError`` inside PyTorch;
:func:`nondeterministic_op` recognises it, and ``trainer.train`` turns it into one line that
names the operation and the key. Nothing falls back silently.

Bit-for-bit reproduction also needs the same device model and software builds:
:func:`hardware_identity` is recorded in every checkpoint, and a resume that changes it, or
switches the key, continues the run with a warning (:func:`warn_if_not_reproducible`).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.utils.deterministic

__all__ = ["CUBLAS_WORKSPACE", "apply_determinism", "hardware_identity", "nondeterministic_op",
           "nondeterministic_op_message", "recorded_reproduction", "restored_mode",
           "warn_if_not_reproducible"]

CUBLAS_WORKSPACE = ":4096:8"
# the two workspace settings cuBLAS documents as reproducible
_DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")
_NO_KERNEL = re.compile(r"^(?P<op>\S+) does not have a deterministic implementation")
_CUBLAS = "this operation is not deterministic because it uses CuBLAS"


def apply_determinism(enabled: bool, device: torch.device, fill: bool = True) -> bool:
    """Set (``enabled``) or leave off PyTorch's strict deterministic mode for training on
    ``device``; returns whether it is on. Only CUDA is affected (module docstring). ``fill``:
    whether the mode also fills new uninitialized tensors (``training.deterministic_fill``)."""
    if device.type != "cuda":
        return False
    if enabled:
        if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in _DETERMINISTIC_WORKSPACES:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
        torch.use_deterministic_algorithms(True)
        torch.utils.deterministic.fill_uninitialized_memory = fill
    else:
        torch.use_deterministic_algorithms(False)
    return enabled


@contextmanager
def restored_mode() -> Iterator[None]:
    """PyTorch's deterministic mode as it was before the block, set back after it: a segment
    trained in a notebook or a test must not leave strict mode on for the code that follows
    (an operation without a deterministic kernel would then raise there)."""
    was = (torch.are_deterministic_algorithms_enabled(),
           torch.is_deterministic_algorithms_warn_only_enabled(),
           torch.utils.deterministic.fill_uninitialized_memory)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
        torch.utils.deterministic.fill_uninitialized_memory = was[2]


def nondeterministic_op(error: BaseException) -> str | None:
    """The operation named by PyTorch's refusal in strict deterministic mode (``"cuBLAS"``
    for the workspace's), or None when ``error`` is another error."""
    if not isinstance(error, RuntimeError):
        return None
    text = str(error).strip()
    found = _NO_KERNEL.match(text)
    if found:
        return found.group("op")
    if _CUBLAS in text:
        return "cuBLAS"
    return None


def nondeterministic_op_message(op: str) -> str:
    """One line for a run stopped by an operation without a deterministic kernel."""
    return (
        f"the operation {op} has no deterministic CUDA kernel, and training.deterministic is "
        "on (the default), so the run stopped rather than train a result it could not "
        "reproduce; set training.deterministic: false to train with non-deterministic "
        "kernels (runs and resumes then differ in float rounding)"
    )


def hardware_identity(device: torch.device) -> dict[str, str]:
    """What a run's bit-for-bit reproduction depends on besides its config and world size:
    the device model and the torch and CUDA builds, and on CPU torch's intra-op thread count
    (a CPU kernel splits its sums by thread: the unit step's bits are the same on any number
    of processes at one threads-per-process), recorded in every checkpoint."""
    identity = {"device": device.type, "torch": str(torch.__version__)}
    if device.type == "cpu":
        identity["threads"] = str(torch.get_num_threads())
    if device.type == "cuda":
        identity["device"] = torch.cuda.get_device_name(device)
        identity["cuda"] = str(torch.version.cuda)
    return identity


def recorded_reproduction(payload: dict) -> tuple[dict[str, str] | None, bool | None]:
    """A checkpoint's recorded ``hardware`` (names to text, as :func:`hardware_identity`
    writes it) and ``deterministic`` (true or false); None for each that an older checkpoint
    lacks. Either of another type raises a TypeError naming it: every process of a resume
    calls this, so that all refuse such a checkpoint alike."""
    hardware, deterministic = payload.get("hardware"), payload.get("deterministic")
    if hardware is not None and not (isinstance(hardware, dict) and all(
            isinstance(key, str) and isinstance(value, str) for key, value in hardware.items())):
        what = ("a mapping of other values" if isinstance(hardware, dict)
                else f"of type {type(hardware).__name__}")
        raise TypeError(f"its 'hardware' is {what}, not a mapping of names to text")
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"its 'deterministic' is of type {type(deterministic).__name__}, not "
                        "true or false")
    return hardware, deterministic


def warn_if_not_reproducible(path: Path, payload: dict, deterministic: bool,
                              hardware: dict[str, str]) -> None:
    """Warn when a resume continues the run, but not bit for bit: another device model or
    software build, or deterministic kernels switched (both recorded since they existed).
    Either recorded entry of another type (a checkpoint written whole, by another program)
    raises a TypeError naming it, which the resume words as one line."""
    recorded, was = recorded_reproduction(payload)
    # a key the checkpoint does not hold was not recorded yet when it was written
    changed = "" if recorded is None else ", ".join(
        f"{key} {recorded.get(key)!r} -> {hardware.get(key)!r}"
        for key in sorted(set(recorded) | set(hardware))
        if key in recorded and recorded.get(key) != hardware.get(key))
    if changed:
        warnings.warn(f"resuming {path} on other hardware or software ({changed}): the run "
                      "continues up to float rounding, not bit for bit", stacklevel=3)
    if was is not None and was != deterministic and hardware["device"] != "cpu":
        warnings.warn(f"resuming {path}, trained with deterministic kernels "
                      f"{'on' if was else 'off'}, with them {'on' if deterministic else 'off'} "
                      "(training.deterministic): the run is not reproducible bit for bit",
                      stacklevel=3)
