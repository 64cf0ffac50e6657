"""The compiled CPU kernels of the attentions across rows and across features
(puicl_model.net.backends.cpu_kernel) and the calibration that decides whether ``auto`` uses them.

They must compute PyTorch's attention and its gradient (to float32 rounding), deterministically,
only where they apply; choosing them where they cannot be built must say why; ``auto`` must
pick what the calibration measured faster.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from puicl_model.net.backends import calibration, cpu_kernel, resolve_backend
from puicl_model.net.backends.packed import attend_sdpa_features, attend_sdpa_rows
from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel

# The session's first test compiles the kernel (~2 s on an AVX-512 Xeon, ~20 s on an AVX2 AMD
# EPYC): the full suite (CI) runs this file, the quick subset (-m "not slow") leaves it out.
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fresh_kernel_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> None:
    """Every test decides for itself whether the kernel loads; one build cache per session."""
    cache = tmp_path_factory.getbasetemp() / "kernel-cache"
    monkeypatch.setenv(cpu_kernel.ENV_CACHE, str(cache))
    cpu_kernel._reset_for_tests()
    yield
    cpu_kernel._reset_for_tests()


def require_kernel() -> None:
    try:
        cpu_kernel.load_kernel()
    except cpu_kernel.KernelUnavailable as error:
        pytest.skip(f"CPU attention kernel not built here: {error}")


def reference_attention(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    columns, rows, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (t.transpose(1, 2) for t in qkv.view(columns, rows, 3, heads, e // heads).unbind(2))
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(columns, rows, e)


def reference_feature_attention(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    columns, rows, three_e = qkv.shape
    e = three_e // 3
    q, k, v = (
        t.permute(1, 2, 0, 3) for t in qkv.view(columns, rows, 3, heads, e // heads).unbind(2)
    )
    return F.scaled_dot_product_attention(q, k, v).permute(2, 0, 1, 3).reshape(columns, rows, e)


def strided_block(columns: int, rows: int, heads: int, seed: int) -> torch.Tensor:
    """A task's rows cut out of a larger packed block, as the model passes them."""
    generator = torch.Generator().manual_seed(seed)
    e = 16 * heads
    packed = torch.randn(columns, rows + 7, 3 * e, generator=generator) * 1.5
    return packed[:, 3 : 3 + rows]


def gradients(function, qkv: torch.Tensor, heads: int, grad_out: torch.Tensor):
    leaf = qkv.detach().clone().requires_grad_(True)
    out = function(leaf, heads)
    out.backward(grad_out)
    return out.detach(), leaf.grad


KERNELS = {  # axis -> (the kernel's entry point, PyTorch's attention along that axis)
    "rows": (cpu_kernel.attend_rows, reference_attention),
    "features": (cpu_kernel.attend_features, reference_feature_attention),
}


@pytest.mark.parametrize(
    ("axis", "columns", "rows", "heads"),
    # Across rows: 1 row, rows that fill no block of 32 (17, 33, 257), 8 heads.
    [("rows", *shape) for shape in [(1, 1, 1), (3, 17, 2), (2, 33, 8), (4, 64, 2), (2, 100, 8),
                                    (1, 257, 1)]]
    # Across features: one tile of 16 rows and partial tiles; fewer and more columns than 8
    # (scores are computed 8 columns at a time), 21 as in stage-100 training.
    + [("features", *shape) for shape in [(1, 1, 1), (2, 15, 2), (5, 16, 8), (9, 17, 8),
                                          (21, 40, 2), (33, 50, 1)]],
)
def test_kernel_outputs_and_gradients_equal_pytorchs(
    axis: str, columns: int, rows: int, heads: int
) -> None:
    require_kernel()
    attend, reference = KERNELS[axis]
    qkv = strided_block(columns, rows, heads, seed=rows)  # the feature kernel copies it first
    grad_out = torch.randn(columns, rows, 16 * heads, generator=torch.Generator().manual_seed(1))
    out, grad = gradients(attend, qkv, heads, grad_out)
    out_ref, grad_ref = gradients(reference, qkv, heads, grad_out)
    # Sums over n terms in another order: float32 rounding grows like sqrt(n).
    terms = rows if axis == "rows" else columns
    tolerance = 2e-6 * max(1.0, terms**0.5)
    assert (out - out_ref).abs().max() <= tolerance * out_ref.abs().max()
    assert (grad - grad_ref).abs().max() <= tolerance * grad_ref.abs().max()


@pytest.mark.parametrize("axis", list(KERNELS))
def test_kernel_is_deterministic_and_independent_of_the_thread_count(axis: str) -> None:
    require_kernel()
    attend = KERNELS[axis][0]
    qkv = strided_block(6, 150, 8, seed=3).contiguous()
    grad_out = torch.randn(6, 150, 128, generator=torch.Generator().manual_seed(2))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _, one_thread = gradients(attend, qkv, 8, grad_out)
        torch.set_num_threads(2)
        _, two_threads = gradients(attend, qkv, 8, grad_out)
        _, again = gradients(attend, qkv, 8, grad_out)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one_thread, two_threads)
    assert torch.equal(two_threads, again)


def test_the_kernel_is_used_only_for_cpu_float32_training_with_16_dim_heads() -> None:
    require_kernel()
    qkv = strided_block(2, 40, 2, seed=4).requires_grad_(False)
    leaf = qkv.detach().clone().requires_grad_(True)
    assert cpu_kernel.applies(leaf, 2)
    assert not cpu_kernel.applies(qkv, 2)  # no gradient wanted: inference
    with torch.no_grad():
        assert not cpu_kernel.applies(leaf, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not cpu_kernel.applies(leaf, 2)
    assert not cpu_kernel.applies(leaf, 4)  # heads of 8 dimensions
    assert not cpu_kernel.applies(leaf.double(), 2)


def model_gradients(model: PUICLModel, batch) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    logits = model(batch)
    logits[batch.unlabeled_mask].log_softmax(-1)[:, 1].sum().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_the_cpu_kernel_backend_runs_the_kernel_in_training_only() -> None:
    require_kernel()
    torch.manual_seed(0)
    model = PUICLModel(ModelConfig(embed_dim=32, num_layers=2, num_heads=2, ff_dim=48))
    rng = np.random.default_rng(5)
    tasks = [rng.standard_normal((90, 6)).astype(np.float32),
             rng.standard_normal((61, 6)).astype(np.float32)]
    batch = collate_tasks(tasks, [30, 20])
    grads = {}
    for backend in ("cpu_kernel", "packed"):
        model.attention = backend
        grads[backend] = model_gradients(model, batch)
        with torch.no_grad():
            grads[backend + " inference"] = model(batch)
    assert not torch.equal(grads["cpu_kernel"], grads["packed"])  # a different kernel really ran
    torch.testing.assert_close(grads["cpu_kernel"], grads["packed"], rtol=1e-4, atol=1e-6)
    # inference is PyTorch's attention with either backend, bit for bit
    assert torch.equal(grads["cpu_kernel inference"], grads["packed inference"])


def test_without_a_compiler_choosing_the_kernel_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/puicl-cc")
    cpu = torch.device("cpu")
    with pytest.raises(cpu_kernel.KernelUnavailable,
                       match=r"no C compiler \(/nonexistent/puicl-cc\) found.*'packed'"):
        resolve_backend("cpu_kernel", cpu, training=True)
    with pytest.raises(cpu_kernel.KernelUnavailable, match="no C compiler"):  # remembered
        PUICLModel(ModelConfig(embed_dim=32, num_layers=1, num_heads=2, ff_dim=48),
                   attention="cpu_kernel")(collate_tasks([np.ones((4, 2))], [2]))
    assert resolve_backend("auto", cpu, training=True) == "packed"  # auto needs no compiler


def test_a_failing_build_is_reported_and_leaves_no_library_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    compiler = tmp_path / "broken-cc"
    compiler.write_text("#!/bin/sh\necho 'cc: fatal error: no vector support' >&2\nexit 1\n")
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CC", str(compiler))
    monkeypatch.setenv(cpu_kernel.ENV_CACHE, str(cache))
    with pytest.raises(cpu_kernel.KernelUnavailable,
                       match=r"build.* failed: cc: fatal error: no vector support"):
        cpu_kernel.load_kernel()
    assert not any(path.suffix == ".so" for path in cache.iterdir())


@pytest.mark.slow  # two fresh builds of the kernels
def test_the_build_is_cached_per_source_and_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(cpu_kernel.ENV_CACHE, str(tmp_path))
    require_kernel()
    built = sorted(tmp_path.glob("attention_d16-*.so"))
    assert len(built) == 1
    modified = os.stat(built[0]).st_mtime_ns
    cpu_kernel._reset_for_tests()
    cpu_kernel.load_kernel()
    assert os.stat(built[0]).st_mtime_ns == modified  # loaded, not rebuilt


def private_cache(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """A kernel cache of this test's own, holding a copy of the session's build (the cache
    key is the same, so nothing is compiled again)."""
    require_kernel()
    for library in Path(os.environ[cpu_kernel.ENV_CACHE]).glob("attention_d16-*.so"):
        shutil.copy2(library, directory / library.name)
    monkeypatch.setenv(cpu_kernel.ENV_CACHE, str(directory))
    cpu_kernel._reset_for_tests()
    cpu_kernel.load_kernel()  # from the copy


@pytest.mark.parametrize("kernel_seconds", [0.5, 2.0])
def test_auto_picks_the_backend_the_calibration_found_faster(
    monkeypatch: pytest.MonkeyPatch, tmp_path, kernel_seconds: float
) -> None:
    private_cache(monkeypatch, tmp_path)
    timings = iter([kernel_seconds, 1.0] * 10)  # kernel, sdpa, kernel, sdpa, ...
    monkeypatch.setattr(calibration, "_time_pass", lambda *args: next(timings))
    expected = "cpu_kernel" if kernel_seconds < 1.0 else "packed"
    assert resolve_backend("auto", torch.device("cpu"), training=True) == expected
    # the verdict is stored with the build, per thread count, and read back without timing
    verdicts = list(tmp_path.glob("*.calibration-*threads.json"))
    assert len(verdicts) == 1
    monkeypatch.setattr(calibration, "_time_pass", lambda *args: pytest.fail("timed again"))
    assert resolve_backend("auto", torch.device("cpu"), training=True) == expected


def test_the_calibration_times_both_real_kernels(monkeypatch: pytest.MonkeyPatch, tmp_path):
    private_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(calibration, "_ROWS", 64)  # a smaller task: the same code, quicker
    verdict = calibration.measure()
    assert verdict["kernel_seconds"] > 0 and verdict["sdpa_seconds"] > 0
    assert verdict["kernel_faster"] == (
        verdict["kernel_seconds"] < calibration.MARGIN * verdict["sdpa_seconds"]
    )


def test_sdpa_fallbacks_are_pytorchs_attention() -> None:
    qkv = strided_block(2, 30, 2, seed=6)
    assert torch.equal(attend_sdpa_rows(qkv, 2, 30), reference_attention(qkv, 2))
    assert torch.equal(attend_sdpa_features(qkv, 2), reference_feature_attention(qkv, 2))
