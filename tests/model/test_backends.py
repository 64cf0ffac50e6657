"""Every attention backend computes the specification (puicl_model.net.specification).

Outputs within 1e-5 and gradients within 1e-4 (relative to the gradient's scale), on batches of
tasks of different sizes, with query rows; so does the fused inference path; the specification
itself is invariant to the order of rows and features; the parameter names of the two models
are the same; the options that were removed are refused, and accepted at their old default.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_common.configio import ConfigError, from_mapping
from puicl_model.net.backends import BACKENDS, cpu_kernel, resolve_backend
from puicl_model.net.backends.packed_inference import inference_logits, packed_inference_logits
from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import REMOVED_OPTIONS, ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.specification import PUICLSpecification

# 16-dimensional heads, so that the cpu_kernel backend runs its compiled kernels
CONFIG = ModelConfig(embed_dim=32, num_layers=2, num_heads=2, ff_dim=48)
# (labeled, unlabeled, features): mixed sizes, two tasks of one shape, two of one feature count
SHAPES = [(7, 13, 3), (12, 5, 6), (4, 20, 2), (7, 13, 3), (30, 31, 6), (9, 40, 1), (5, 10, 6)]
# (the bucketed backend pads (12, 5, 6) and (5, 10, 6) into one bucket: its row mask is tested)


def kernel_or_skip() -> None:
    try:
        cpu_kernel.load_kernel()
    except cpu_kernel.KernelUnavailable as error:
        pytest.skip(f"the CPU kernel cannot be built here: {error}")


@pytest.fixture(scope="module")
def models() -> tuple[PUICLModel, PUICLSpecification]:
    torch.manual_seed(3)
    model = PUICLModel(CONFIG)
    with torch.no_grad():  # larger outputs, so that the comparisons are not vacuous
        for parameter in model.decoder.parameters():
            parameter.mul_(3.0)
    spec = PUICLSpecification(CONFIG)
    spec.load_state_dict(model.state_dict())
    return model, spec


def make_batch(seed: int, queries: bool = False):
    rng = np.random.default_rng(seed)
    tasks, labeled, context = [], [], []
    for n_labeled, n_unlabeled, d in SHAPES:
        x = rng.normal(size=(n_labeled + n_unlabeled, d)).astype(np.float32)
        x[n_labeled:] += rng.normal(size=d).astype(np.float32)
        tasks.append(x)
        labeled.append(n_labeled)
        context.append(n_labeled + n_unlabeled - (3 if queries else 0))
    return collate_tasks(tasks, labeled, context if queries else None)


def loss(logits: torch.Tensor, batch) -> torch.Tensor:
    return torch.log_softmax(logits, -1)[..., 1][batch.unlabeled_mask].sum()


def gradients(module: torch.nn.Module, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    module.zero_grad(set_to_none=True)
    logits = module(batch)
    loss(logits, batch).backward()
    return logits.detach(), {name: p.grad.clone() for name, p in module.named_parameters()}


def test_the_two_models_have_the_same_parameter_names() -> None:
    model, spec = PUICLModel(CONFIG), PUICLSpecification(CONFIG)
    assert [(n, p.shape) for n, p in model.named_parameters()] == [
        (n, p.shape) for n, p in spec.named_parameters()
    ]
    assert sum(p.numel() for p in PUICLSpecification().parameters()) == 1_226_882


def test_removed_options_are_refused_and_accepted_at_their_old_default() -> None:
    """Stored configs name the removed options at their old default: those load, and are
    stored and hashed as before (left out); any other value is refused, naming the key."""
    stored = {**CONFIG.to_mapping(), **REMOVED_OPTIONS}
    assert from_mapping(ModelConfig, stored, "model") == CONFIG
    assert set(CONFIG.to_mapping()) == {"embed_dim", "num_layers", "num_heads", "ff_dim",
                                        "feature_clip", "max_features"}
    for key, value in (("norm", "pre_rmsnorm"), ("thinking_rows", 16), ("feature_group", 2),
                       ("value_encoder", "rbf"), ("value_bins", 8)):
        with pytest.raises(ConfigError, match=rf"^model\.{key}: removed: the option did not beat"):
            from_mapping(ModelConfig, {key: value}, "model")


def test_the_block_is_the_papers() -> None:
    """One block over one unpadded task, against torch.nn.MultiheadAttention written out as
    paper §3.2: attention across the cells of each row, then across the rows of each column,
    then the feed-forward, each followed by residual and LayerNorm."""
    from puicl_model.net.specification import DenseCells

    torch.manual_seed(1)
    model = PUICLModel(CONFIG)
    block, e, heads = model.blocks[0], CONFIG.embed_dim, CONFIG.num_heads
    batch = collate_tasks([np.random.default_rng(6).normal(size=(9, 4)).astype(np.float32)], [3])
    h = torch.randn(9, 5, e)  # [rows, columns, e]

    def mha(attention, tokens):  # tokens [N, L, e]: attention along L
        reference = torch.nn.MultiheadAttention(e, heads, batch_first=True)
        reference.in_proj_weight.data.copy_(attention.qkv.weight)
        reference.in_proj_bias.data.copy_(attention.qkv.bias)
        reference.out_proj.load_state_dict(attention.out.state_dict())
        return reference(tokens, tokens, tokens, need_weights=False)[0]

    with torch.no_grad():
        expected = block.norm_features(h + mha(block.attn_features, h))
        across_rows = mha(block.attn_rows, expected.transpose(0, 1)).transpose(0, 1)
        expected = block.norm_rows(expected + across_rows)
        expected = block.norm_ff(expected + block.ff(expected))
        got = block(h.reshape(-1, e), DenseCells(batch)).view(9, 5, e)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(("backend", "device"), [
    # cpu_kernel compiles the kernel on first use: left out of the quick subset
    *[pytest.param(b, "cpu", marks=pytest.mark.slow) if b == "cpu_kernel" else (b, "cpu")
      for b in BACKENDS if b != "auto"],
    pytest.param("bucketed", "cuda", marks=CUDA),
    pytest.param("bucketed_matmul", "cuda", marks=CUDA),
    pytest.param("padded", "cuda", marks=CUDA),
    pytest.param("auto", "cuda", marks=CUDA),
])
def test_backend_matches_the_specification_outputs_and_gradients(backend, device, models):
    if backend == "cpu_kernel":
        kernel_or_skip()
    model, spec = models
    model.attention = backend
    model.to(device), spec.to(device)
    try:
        batch = make_batch(0).to(device)
        expected, expected_grads = gradients(spec, batch)
        assert expected[batch.unlabeled_mask][:, 1].std() > 1e-2  # outputs vary
        got, got_grads = gradients(model, batch)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
        assert (got[~batch.row_mask] == 0).all()  # padded rows are exactly zero
        for name, grad in expected_grads.items():
            assert grad.abs().max() > 0, name  # every parameter takes part
            error = (got_grads[name] - grad).abs().max() / grad.abs().max()
            assert error <= 1e-4, (name, float(error))
        # query rows (inference: no gradients)
        batch = make_batch(1, queries=True).to(device)
        with torch.no_grad():
            torch.testing.assert_close(model(batch), spec(batch), rtol=0, atol=1e-5)
    finally:
        model.attention = "auto"
        model.to("cpu"), spec.to("cpu")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_short_attention_is_scaled_dot_product_attention(device) -> None:
    """The products of ``bucketed_matmul``'s attention across features: PyTorch's attention in
    float32, forward and backward, and within bfloat16's rounding of it under autocast."""
    from puicl_model.net.backends.bucketed import short_attention

    generator = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(50, 8, 21, 16, generator=generator).to(device).requires_grad_()
               for _ in range(3))
    weights = torch.randn(50, 8, 21, 16, generator=generator).to(device)
    outputs, grads = [], []
    for attend in (torch.nn.functional.scaled_dot_product_attention, short_attention):
        out = attend(q, k, v)
        outputs.append(out.detach())
        grads.append(torch.autograd.grad((out * weights).sum(), (q, k, v)))
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=1e-5)
    for got, expected in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-4 * expected.abs().max())
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        low = short_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), outputs[0], rtol=0, atol=0.05)


def test_bucketed_attention_never_takes_cudnn(models, monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN plans a kernel for every new shape (puicl_model.net.backends.bucketed): both of the
    bucketed layout's attentions run with its kernels switched off, and only there."""
    import puicl_model.net.backends.bucketed as bucketed

    model, _ = models
    flags, attend = [], bucketed.F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        flags.append(torch.backends.cuda.cudnn_sdp_enabled())
        return attend(*args, **kwargs)

    monkeypatch.setattr(bucketed.F, "scaled_dot_product_attention", recording)
    model.attention = "bucketed"
    try:
        with torch.no_grad():
            model(make_batch(0))
    finally:
        model.attention = "auto"
    buckets = len(bucketed.BucketedCells(make_batch(0)).buckets)
    assert len(flags) == 2 * CONFIG.num_layers * buckets and not any(flags)
    assert torch.backends.cuda.cudnn_sdp_enabled()  # restored outside


@pytest.mark.parametrize("queries", [False, True])
def test_the_allocation_free_inference_path_matches_the_specification(models, queries) -> None:
    model, spec = models
    batch = make_batch(2, queries)
    with torch.no_grad():
        expected = spec(batch)
        torch.testing.assert_close(packed_inference_logits(model, batch), expected,
                                   rtol=0, atol=1e-5)
        torch.testing.assert_close(inference_logits(model, batch), expected, rtol=0, atol=1e-5)


def test_the_specification_is_invariant_to_row_and_feature_order(models) -> None:
    _, spec = models
    rng = np.random.default_rng(4)
    x = rng.normal(size=(30, 5)).astype(np.float32)
    x[10:] += 0.7
    with torch.no_grad():
        base = spec(collate_tasks([x], [10]))[0]
        labeled_rows = np.r_[rng.permutation(10), np.arange(10, 30)]
        pool_rows = np.r_[np.arange(10), 10 + rng.permutation(20)]
        features = rng.permutation(5)
        torch.testing.assert_close(spec(collate_tasks([x[labeled_rows]], [10]))[0][10:],
                                   base[10:], rtol=0, atol=1e-5)
        torch.testing.assert_close(spec(collate_tasks([x[pool_rows]], [10]))[0][10:],
                                   base[pool_rows[10:]], rtol=0, atol=1e-5)
        torch.testing.assert_close(spec(collate_tasks([x[:, features]], [10]))[0][10:],
                                   base[10:], rtol=0, atol=1e-5)


def test_the_specification_ignores_padding(models) -> None:
    """A task alone and the same task padded inside a batch get the same outputs."""
    _, spec = models
    batch = make_batch(5)
    with torch.no_grad():
        together = spec(batch)
        for index, (n_labeled, n_unlabeled, d) in enumerate(SHAPES):
            rows = n_labeled + n_unlabeled
            alone = collate_tasks([batch.x[index, :rows, :d]], [n_labeled])
            torch.testing.assert_close(together[index, :rows], spec(alone)[0], rtol=0, atol=1e-5)


def test_unknown_backend_names_are_refused() -> None:
    with pytest.raises(ValueError, match="attention must be one of auto, packed, cpu_kernel"):
        PUICLModel(CONFIG, attention="flash")
    with pytest.raises(ValueError, match="attention backend must be one of"):
        resolve_backend("flash", torch.device("cpu"), training=True)


def test_auto_resolves_by_device_and_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    from puicl_model.net.backends import calibration

    cpu = torch.device("cpu")
    gpu = torch.device("cuda", 0)
    assert resolve_backend("auto", gpu, training=True) == "bucketed_matmul"
    assert resolve_backend("auto", gpu, training=False) == "bucketed"
    assert resolve_backend("auto", cpu, training=False) == "packed"  # no kernel for inference
    for faster, expected in ((True, "cpu_kernel"), (False, "packed")):
        monkeypatch.setattr(calibration, "kernel_is_faster", lambda faster=faster: faster)
        assert resolve_backend("auto", cpu, training=True) == expected
    with pytest.raises(ValueError, match="'cpu_kernel' runs on CPU only"):
        resolve_backend("cpu_kernel", torch.device("cuda", 0), training=True)


def test_a_model_at_auto_takes_the_one_auto_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's ``auto`` is :func:`auto_backend`'s inference rule, not a rule of its own."""
    import puicl_model.net.backends as backends
    from puicl_model.net.backends.bucketed import BucketedCells

    batch = collate_tasks([torch.randn(6, 3)], [2])
    asked = []

    def rule(device: torch.device, training: bool) -> str:
        asked.append((device.type, training))
        return "bucketed"

    monkeypatch.setattr(backends, "auto_backend", rule)
    assert isinstance(PUICLModel(CONFIG).layout(batch), BucketedCells)
    assert asked == [("cpu", False)]
