"""Attention for CPU training: compiled kernels for heads of 16 dimensions.

The paper's model has 8 heads of 16 dimensions. On CPU, more than half of a training step is
attention, and PyTorch's flash-attention kernel suits neither of the model's two shapes:

* across rows (:func:`attend_rows`), the narrow (16-wide) products run at about a third of the
  machine's matrix-product speed; ``kernels/attention_d16.c`` blocks them like a
  matrix-multiply micro-kernel: 1.2–1.6× faster, forward and forward + backward;
* across features (:func:`attend_features`), every row is a problem of only ``d + 1`` tokens
  and per-problem overhead dominates; the kernel puts 16 rows in the vector lanes: 1.7–5.8×
  faster forward, 2.1–4.6× forward + backward.

Measurements: docs/performance.md, Trainer. Both compute the same function as PyTorch's kernel,
to float32 rounding (tested). They serve training only (unmasked attention with gradients):
inference and the classifier keep PyTorch's kernel, bit for bit as before.

The C file is compiled on first use with the system's C compiler (``$CC``, else ``cc``) into a
per-user cache (``$PUICL_KERNEL_CACHE``, else ``~/.cache/puicl/kernels``), keyed by the
source, the flags, the compiler and the CPU. Without a compiler, on a platform where the build
fails, or with ``PUICL_CPU_ATTENTION=0``, training uses PyTorch's kernel: same function,
slower. Nothing is compiled for inference.
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
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["HEAD_DIM", "attend_features", "attend_rows", "kernel_available", "kernel_status"]

HEAD_DIM = 16
ENV_SWITCH = "PUICL_CPU_ATTENTION"
ENV_CACHE = "PUICL_KERNEL_CACHE"

_SOURCE = Path(__file__).with_name("kernels") / "attention_d16.c"
_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_status: str | None = None  # None: not tried yet
# Benchmarks switch the kernel off and on within one process (benchmarks/bench_model.py).
_library_enabled = True
# PUICL_CPU_ATTENTION=rows: the row kernel only, PyTorch's for the attention across features
# (to measure the feature kernel's share of a training step: benchmarks/bench_trainer.py).
_feature_kernel_enabled = True


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


def _load() -> ctypes.CDLL | None:
    global _library, _status, _feature_kernel_enabled
    with _lock:
        if _status is not None:
            return _library
        switch = os.environ.get(ENV_SWITCH, "1").strip().lower()
        _feature_kernel_enabled = switch != "rows"
        if switch in ("0", "false", "no", "off"):
            _status = f"disabled by {ENV_SWITCH}"
            return None
        compiler = _compiler()
        if compiler is None:
            _status = f"no C compiler ({os.environ.get('CC', 'cc')}) found"
        else:
            try:
                library = ctypes.CDLL(str(_build(compiler)))
                pointer, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
                library.attn16_forward.restype = ctypes.c_int
                library.attn16_forward.argtypes = [
                    pointer, i64, i64, i32, i32, i32, pointer, pointer, i64, i64, i64, i32,
                ]
                library.attn16_backward.restype = ctypes.c_int
                library.attn16_backward.argtypes = [
                    pointer, i64, i64, i32, i32, i32, pointer, pointer, pointer,
                    i64, i64, i64, pointer, i32,
                ]
                library.feat16_forward.restype = ctypes.c_int
                library.feat16_forward.argtypes = [pointer, i32, i32, i32, pointer, pointer, i32]
                library.feat16_backward.restype = ctypes.c_int
                library.feat16_backward.argtypes = [
                    pointer, i32, i32, i32, pointer, pointer, pointer, pointer, i32,
                ]
                _library, _status = library, "compiled"
            except (OSError, RuntimeError, subprocess.SubprocessError) as error:
                _status = f"build failed: {error}"
        if _library is None:
            warnings.warn(
                f"puicl: the CPU attention kernel is not used ({_status}); training falls back "
                f"to PyTorch's (same results, slower). Set {ENV_SWITCH}=0 to silence this.",
                RuntimeWarning, stacklevel=3,
            )
        return _library


def kernel_available() -> bool:
    """Whether training on CPU uses the compiled kernel (compiles it on the first call)."""
    return _load() is not None


def kernel_status() -> str:
    """Why the kernel is or is not used: "compiled", "disabled by ...", "build failed: ..."."""
    _load()
    return str(_status)


def _reset_for_tests() -> None:
    global _library, _status, _feature_kernel_enabled
    with _lock:
        _library, _status, _feature_kernel_enabled = None, None, True


def _kernel_forward(ctx, qkv: Tensor, num_heads: int, axis: str) -> Tensor:
    """Forward pass of :class:`_RowAttention` ("rows") or :class:`_FeatureAttention`."""
    assert _library is not None  # the Functions are only applied once the library is loaded
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


def _cpu_autocast_enabled() -> bool:
    try:
        return bool(torch.is_autocast_enabled("cpu"))
    except TypeError:  # torch < 2.4 has no device argument
        return bool(torch.is_autocast_cpu_enabled())


def _kernel_applies(qkv: Tensor, num_heads: int, axis: str = "rows") -> bool:
    """Whether the compiled kernel along ``axis`` ("rows" or "features") computes this call."""
    return (
        qkv.requires_grad
        and torch.is_grad_enabled()
        and qkv.device.type == "cpu"
        and qkv.dtype == torch.float32
        and qkv.dim() == 3
        and qkv.shape[1] > 0
        and qkv.shape[2] == 3 * num_heads * HEAD_DIM
        and qkv.stride(2) == 1
        and not _cpu_autocast_enabled()
        and _library_enabled
        and _load() is not None
        and (axis == "rows" or _feature_kernel_enabled)  # set by _load from the switch
    )


def attend_rows(qkv: Tensor, num_heads: int) -> Tensor:
    """Self-attention across the rows of each column: qkv [c, r, 3e] -> [c, r, e].

    Every row attends to every row (the paper's unmasked row attention). With gradients on
    CPU in float32 and heads of 16 dimensions, forward and backward run the compiled kernel;
    otherwise this is plain ``scaled_dot_product_attention``.
    """
    if _kernel_applies(qkv, num_heads):
        return _RowAttention.apply(qkv, num_heads)
    columns, rows, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (
        t.transpose(1, 2)  # [c, H, r, dh]; consecutive rows 3e floats apart
        for t in qkv.view(columns, rows, 3, num_heads, e // num_heads).unbind(2)
    )
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(columns, rows, e)


def attend_features(qkv: Tensor, num_heads: int) -> Tensor:
    """Self-attention across the columns of each row: qkv [c, r, 3e] -> [c, r, e].

    Within every row, each of the c cells attends to all c cells (the paper's attention across
    features). With gradients on CPU in float32 and heads of 16 dimensions, forward and
    backward run the compiled kernel; otherwise this is plain ``scaled_dot_product_attention``.
    """
    if _kernel_applies(qkv, num_heads, "features"):
        return _FeatureAttention.apply(qkv.contiguous(), num_heads)
    columns, rows, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (
        t.permute(1, 2, 0, 3)  # [r, H, c, dh]
        for t in qkv.view(columns, rows, 3, num_heads, e // num_heads).unbind(2)
    )
    # Strided views, no copies: SDPA reads them in place and writes its output in the
    # query's memory order, here [c, r, H, dh], so the reshape back is free.
    out = F.scaled_dot_product_attention(q, k, v)
    return out.permute(2, 0, 1, 3).reshape(columns, rows, e)
