"""The classifier's precision setting: "auto" is float32 on the CPU and bfloat16 autocast on
CUDA; probabilities come back as float64 numpy whatever the precision, and large pools are
chunked the same way on every device. CUDA tests skip without a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_model import PUICLClassifier

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def pu_table(rng: np.random.Generator, n_labeled: int, n_pool: int, d: int):
    X = rng.normal(size=(n_labeled + n_pool, d))
    X[:n_labeled] += 1.0
    s = np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]
    return X, s


def test_auto_is_float32_on_the_cpu(small_weights, rng) -> None:
    X, s = pu_table(rng, 20, 60, 4)
    auto = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    fp32 = PUICLClassifier(weights=small_weights, device="cpu", precision="float32").fit(X, s)
    np.testing.assert_array_equal(auto.predict_proba(X), fp32.predict_proba(X))


def test_bfloat16_on_the_cpu_chunked_returns_float64_close_to_float32(small_weights,
                                                                       rng) -> None:
    X, s = pu_table(rng, 30, 200, 5)
    settings = {"weights": small_weights, "device": "cpu", "single_pass_limit": 64,
                "chunk_size": 40, "random_state": 3}
    exact = PUICLClassifier(**settings).fit(X, s)
    low = PUICLClassifier(precision="bfloat16", **settings).fit(X, s)
    new_rows = rng.normal(size=(7, 5))
    for table in (X[s == 0], new_rows):
        p_low, p_exact = low.predict_proba(table), exact.predict_proba(table)
        assert p_low.dtype == np.float64 and isinstance(p_low, np.ndarray)
        assert np.abs(p_low - p_exact).max() < 0.05
    assert low.planner_.chunked and low.n_passes_ == exact.n_passes_


@needs_cuda
def test_cuda_runs_bfloat16_by_default_close_to_the_cpu(small_weights, rng) -> None:
    X, s = pu_table(rng, 30, 200, 5)
    settings = {"weights": small_weights, "single_pass_limit": 64, "chunk_size": 40}
    cpu = PUICLClassifier(device="cpu", **settings).fit(X, s)
    gpu = PUICLClassifier(device="cuda", **settings).fit(X, s)
    assert gpu.device_.type == "cuda" and gpu.planner_.chunked
    for table in (X[s == 0], rng.normal(size=(7, 5))):
        p_gpu = gpu.predict_proba(table)
        assert p_gpu.dtype == np.float64 and isinstance(p_gpu, np.ndarray)
        assert np.abs(p_gpu - cpu.predict_proba(table)).max() < 0.05
    fp32 = PUICLClassifier(device="cuda", precision="float32", **settings).fit(X, s)
    np.testing.assert_allclose(fp32.predict_proba(X[s == 0]), cpu.predict_proba(X[s == 0]),
                               atol=1e-4)
