"""The ``cpu_kernel`` backend's attention: compiled kernels for heads of 16 dimensions.

The paper's model has 8 heads of 16 dimensions. On a CPU with AVX-512, more than half of a
training step is attention, and PyTorch's flash-attention kernel suits neither of the model's
two shapes:

* across rows (:func:`attend_rows`), the narrow (16-wide) products run at about a third of the
  machine's matrix-product speed; ``kernels/attention_d16.c`` blocks them like a
  matrix-multiply micro-kernel;
* across features (:func:`attend_features`), every row is a problem of only ``d + 1`` tokens
  and per-problem overhead dominates; the kernel puts 16 rows in the vector lanes.

On a CPU without AVX-512 the same kernels are slower than PyTorch's (docs/performance.md), so
the backend is opt-in: ``attention: cpu_kernel`` asks for it, and ``auto`` takes it only where
:mod:`puicl_model.net.backends.calibration` measured it faster on this CPU.

Both compute the same function as PyTorch's kernel, to float32 rounding (tested). They serve
training only (unmasked attention with gradients, float32, no autocast); every other call of
the backend runs PyTorch's kernel.

The C file is compiled when the backend is first chosen, with the system's C compiler
(``$CC``, else ``cc``), into a per-user cache (``$PUICL_KERNEL_CACHE``, else
``~/.cache/puicl/kernels``), keyed by the source, the flags, the compiler and the CPU. Without
a compiler, or where the build fails, choosing the backend raises :class:`KernelUnavailable`
with the reason.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch
from torch import Tensor

from puicl_common.runtime import autocast_active

__all__ = ["HEAD_DIM", "KernelUnavailable", "applies", "attend_features", "attend_rows",
           "load_kernel"]

HEAD_DIM = 16
ENV_CACHE = "PUICL_KERNEL_CACHE"

_SOURCE = Path(__file__).resolve().parent.parent / "kernels" / "attention_d16.c"
_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_library_path: Path | None = None
_failure: str | None = None  # why the kernel cannot be had, once a build was tried


class KernelUnavailable(RuntimeError):
    """The compiled kernel cannot be built or loaded here; the message says why."""


def _flags() -> list[str]:
    flags = ["-O3", "-march=native", "-fPIC", "-shared", "-fopenmp", "-std=gnu11"]
    if platform.machine().lower() in ("x86_64", "amd64"):
        # On AVX-512 machines GCC defaults to 256-bit vectors for what it vectorizes itself;
        # the kernel is written for 16 floats per vector.
        flags.append("-mprefer-vector-width=512")
    return flags


def _cpu_signature() -> str:
    """What ``-march=native`` compiles for: the CPU model and its feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = ("model name", "flags", "Features")
    keep = [line for line in text.splitlines() if line.startswith(wanted)]
    return "\n".join(sorted(set(keep)))


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def _cache_dir() -> Path:
    root = os.environ.get(ENV_CACHE)
    return Path(root) if root else Path.home() / ".cache" / "puicl" / "kernels"


def _build(compiler: str) -> Path:
    """Compile the kernel unless a build for this source, compiler and CPU is cached."""
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, check=False
    ).stdout
    key = hashlib.sha256(
        "\0".join([_SOURCE.read_text(), " ".join(_flags()), compiler, version, _cpu_signature()])
        .encode()
    ).hexdigest()[:20]
    target = _cache_dir() / f"attention_d16-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build into a temporary file and rename: concurrent processes (torchrun ranks) never see
    # a half-written library.
    handle, temporary = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(handle)
    try:
        # Without OpenMP (Apple's clang has none) the pragmas are ignored: one thread per call.
        for flags in (_flags(), [flag for flag in _flags() if flag != "-fopenmp"]):
            result = subprocess.run(
                [compiler, *flags, str(_SOURCE), "-o", temporary, "-lm"],
                capture_output=True, text=True, check=False,
            )
            if result.returncode == 0:
                break
        else:
            raise RuntimeError(result.stderr.strip()[-2000:] or f"exit status {result.returncode}")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def load_kernel() -> Path:
    """Build (or find in the cache) and load the kernel; returns the library's path.

    Raises :class:`KernelUnavailable` with the reason where there is no compiler or the build
    fails; the failure is remembered, so later calls raise at once.
    """
    global _library, _library_path, _failure
    with _lock:
        if _library_path is not None:
            return _library_path
        if _failure is not None:
            raise KernelUnavailable(_failure)
        compiler = _compiler()
        if compiler is None:
            _failure = (f"no C compiler ({os.environ.get('CC', 'cc')}) found; install one (gcc or "
                        "clang) or choose the attention backend 'packed'")
            raise KernelUnavailable(_failure)
        try:
            path = _build(compiler)
            library = ctypes.CDLL(str(path))
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            _failure = f"building the CPU attention kernel failed: {error}"
            raise KernelUnavailable(_failure) from None
        _declare(library)
        _library, _library_path = library, path
        return path


def _declare(library: ctypes.CDLL) -> None:
    """The C signatures of the kernel's four entry points."""
    pointer, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    library.attn16_forward.restype = ctypes.c_int
    library.attn16_forward.argtypes = [
        pointer, i64, i64, i32, i32, i32, pointer, pointer, i64, i64, i64, i32,
    ]
    library.attn16_backward.restype = ctypes.c_int
    library.attn16_backward.argtypes = [
        pointer, i64, i64, i32, i32, i32, pointer, pointer, pointer, i64, i64, i64, pointer, i32,
    ]
    library.feat16_forward.restype = ctypes.c_int
    library.feat16_forward.argtypes = [pointer, i32, i32, i32, pointer, pointer, i32]
    library.feat16_backward.restype = ctypes.c_int
    library.feat16_backward.argtypes = [
        pointer, i32, i32, i32, pointer, pointer, pointer, pointer, i32,
    ]


def _reset_for_tests() -> None:
    global _library, _library_path, _failure
    with _lock:
        _library, _library_path, _failure = None, None, None


def _kernel_forward(ctx, qkv: Tensor, num_heads: int, axis: str) -> Tensor:
    """Forward pass of :class:`_RowAttention` ("rows") or :class:`_FeatureAttention`."""
    assert _library is not None, "load_kernel() first"
    columns, rows, three_e = qkv.shape
    out = torch.empty(columns, rows, three_e // 3, dtype=qkv.dtype)
    threads = torch.get_num_threads()
    if axis == "rows":
        lse = torch.empty(columns, num_heads, rows, dtype=qkv.dtype)  # log-sum-exp of scores
        failed = _library.attn16_forward(
            qkv.data_ptr(), qkv.stride(0), qkv.stride(1), columns, rows, num_heads,
            out.data_ptr(), lse.data_ptr(), *lse.stride(), threads,
        )
    else:  # the feature kernel writes whole tiles of 16 rows
        lse = torch.empty(columns, num_heads, -(-rows // 16) * 16, dtype=qkv.dtype)
        failed = _library.feat16_forward(
            qkv.data_ptr(), columns, rows, num_heads, out.data_ptr(), lse.data_ptr(), threads,
        )
    if failed:
        raise MemoryError(f"attention: out of memory for {columns} columns x {rows} rows")
    ctx.num_heads, ctx.axis = num_heads, axis
    ctx.save_for_backward(qkv, out, lse)
    return out


def _kernel_backward(ctx, grad: Tensor) -> Tensor:
    """The gradient of ``qkv`` for :func:`_kernel_forward`."""
    assert _library is not None
    qkv, out, lse = ctx.saved_tensors
    columns, rows, _ = qkv.shape
    grad = grad.contiguous()
    grad_qkv = torch.empty(qkv.shape, dtype=qkv.dtype)
    threads = torch.get_num_threads()
    if ctx.axis == "rows":
        failed = _library.attn16_backward(
            qkv.data_ptr(), qkv.stride(0), qkv.stride(1), columns, rows, ctx.num_heads,
            out.data_ptr(), grad.data_ptr(), lse.data_ptr(), *lse.stride(),
            grad_qkv.data_ptr(), threads,
        )
    else:
        failed = _library.feat16_backward(
            qkv.data_ptr(), columns, rows, ctx.num_heads, out.data_ptr(), grad.data_ptr(),
            lse.data_ptr(), grad_qkv.data_ptr(), threads,
        )
    if failed:
        raise MemoryError(f"attention backward: out of memory for {columns} columns x {rows} rows")
    return grad_qkv


# Two Functions, not one with an axis argument, so that profiles name the two attentions.
class _RowAttention(torch.autograd.Function):
    """Unmasked attention across the rows of each column; see :func:`attend_rows`."""

    @staticmethod
    def forward(ctx, qkv: Tensor, num_heads: int) -> Tensor:  # type: ignore[override]
        return _kernel_forward(ctx, qkv, num_heads, "rows")

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return _kernel_backward(ctx, grad), None


class _FeatureAttention(torch.autograd.Function):
    """Attention across the columns of each row (contiguous qkv); see :func:`attend_features`."""

    @staticmethod
    def forward(ctx, qkv: Tensor, num_heads: int) -> Tensor:  # type: ignore[override]
        return _kernel_forward(ctx, qkv, num_heads, "features")

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return _kernel_backward(ctx, grad), None


def applies(qkv: Tensor, num_heads: int) -> bool:
    """Whether the compiled kernel can compute this attention call: training on CPU in float32
    (no autocast), heads of 16 dimensions, ``qkv`` [c, r, 3e] with contiguous last axis."""
    return (
        qkv.requires_grad
        and torch.is_grad_enabled()
        and qkv.device.type == "cpu"
        and qkv.dtype == torch.float32
        and qkv.dim() == 3
        and qkv.shape[1] > 0
        and qkv.shape[2] == 3 * num_heads * HEAD_DIM
        and qkv.stride(2) == 1
        and not autocast_active("cpu")
    )


def attend_rows(qkv: Tensor, num_heads: int) -> Tensor:
    """Unmasked attention across the rows of each column, qkv [c, r, 3e] -> [c, r, e].

    Only for calls where :func:`applies` holds, after :func:`load_kernel`.
    """
    return _RowAttention.apply(qkv, num_heads)


def attend_features(qkv: Tensor, num_heads: int) -> Tensor:
    """Attention across the columns of each row, qkv [c, r, 3e] -> [c, r, e].

    Only for calls where :func:`applies` holds, after :func:`load_kernel`.
    """
    return _FeatureAttention.apply(qkv.contiguous(), num_heads)
