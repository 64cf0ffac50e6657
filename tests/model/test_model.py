"""The transformer of paper §3: sizes, batching, invariances, gradients, precision."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_model.net.backends.packed_inference import inference_logits
from puicl_model.net.batch import TaskBatch, collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.standardization import standardize_features


def random_task(rng: np.random.Generator, n_labeled: int, n_unlabeled: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n_labeled + n_unlabeled, d)).astype(np.float32)
    x[n_labeled:] += rng.normal(size=d).astype(np.float32)  # pool shifted: outputs differ
    return x


def run_alone(model: PUICLModel, x: np.ndarray, n_labeled: int) -> torch.Tensor:
    with torch.no_grad():
        return model(collate_tasks([x], [n_labeled]))[0]


def test_default_config_has_the_papers_parameter_counts() -> None:
    model = PUICLModel(ModelConfig())
    counts = model.parameter_counts()
    assert counts["blocks"] == 1_192_704
    assert counts["encoders"] == 640
    assert counts["decoder"] == 33_538
    assert counts["total"] == 1_226_882 == sum(p.numel() for p in model.parameters())


# tasks that differ in labeled rows, unlabeled rows and features (two share a shape)
SHAPES = [(7, 13, 3), (12, 5, 6), (4, 20, 2), (7, 13, 3), (30, 31, 21)]


@pytest.mark.parametrize("config", [ModelConfig(), None], ids=["default", "small"])
def test_a_padded_batch_equals_each_task_alone(config, small_model, rng) -> None:
    model = PUICLModel(config).eval() if config is not None else small_model
    tasks = [random_task(rng, *shape) for shape in SHAPES]
    n_labeled = [shape[0] for shape in SHAPES]
    batch = collate_tasks(tasks, n_labeled)
    assert tuple(batch.x.shape) == (5, 61, 21)
    with torch.no_grad():
        out = model(batch)
    assert out.dtype == torch.float32 and tuple(out.shape) == (5, 61, 2)
    assert torch.isfinite(out).all()
    for index, (task, labeled) in enumerate(zip(tasks, n_labeled, strict=True)):
        alone = run_alone(model, task, labeled)
        rows = task.shape[0]
        torch.testing.assert_close(out[index, :rows], alone, rtol=0, atol=1e-5)
        assert (out[index, rows:] == 0).all()  # padding rows are exactly zero
        # the outputs vary across the pool, so the comparison above is not vacuous
        assert alone[labeled:, 1].std() > 1e-3


def test_inference_path_equals_differentiable_path(small_model, rng) -> None:
    tasks = [random_task(rng, *shape) for shape in SHAPES[:3]]
    batch = collate_tasks(tasks, [s[0] for s in SHAPES[:3]])
    with torch.no_grad():
        fast = inference_logits(small_model, batch)  # the allocation-free CPU path
    with torch.enable_grad():
        reference = small_model(batch)
    torch.testing.assert_close(fast, reference.detach(), rtol=0, atol=1e-5)


def test_permuting_unlabeled_rows_permutes_the_outputs(small_model, rng) -> None:
    x = random_task(rng, 10, 25, 4)
    base = run_alone(small_model, x, 10)
    order = np.r_[np.arange(10), 10 + rng.permutation(25)]
    permuted = run_alone(small_model, x[order], 10)
    torch.testing.assert_close(permuted[10:], base[order[10:]], rtol=0, atol=1e-5)


def test_permuting_labeled_rows_or_features_leaves_outputs_unchanged(small_model, rng) -> None:
    x = random_task(rng, 10, 25, 4)
    base = run_alone(small_model, x, 10)
    rows = np.r_[rng.permutation(10), np.arange(10, 35)]
    torch.testing.assert_close(run_alone(small_model, x[rows], 10)[10:], base[10:],
                               rtol=0, atol=1e-5)
    columns = rng.permutation(4)
    torch.testing.assert_close(run_alone(small_model, x[:, columns], 10)[10:], base[10:],
                               rtol=0, atol=1e-5)


def test_positive_affine_maps_of_a_feature_change_nothing(small_model, rng) -> None:
    """Standardization with the labeled rows' statistics makes the scale of a column moot."""
    x = random_task(rng, 10, 25, 3)
    scaled = x.copy()
    scaled[:, 1] = scaled[:, 1] * 1000.0 + 5000.0
    torch.testing.assert_close(run_alone(small_model, scaled, 10), run_alone(small_model, x, 10),
                               rtol=0, atol=1e-4)


def test_standardization_uses_labeled_rows_and_saturates_unseen_values() -> None:
    x = torch.tensor([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0], [100.0, 5.0], [2.0, 6.0]])
    z = standardize_features(x, n_labeled=2, clip=100.0)
    # column 0: labeled mean 2, population std 1
    torch.testing.assert_close(z[:, 0], torch.tensor([-1.0, 1.0, 0.0, 98.0, 0.0]))
    # column 1 is constant on the labeled rows: 0 for that value, clipped for any other value
    assert z[0, 1] == 0 and z[2, 1] == 0 and z[4, 1] == 100.0
    assert torch.isfinite(z).all()


def test_gradients_of_a_batch_equal_the_sum_over_tasks(small_model, rng) -> None:
    model = PUICLModel(small_model.config)
    model.load_state_dict(small_model.state_dict())
    tasks = [random_task(rng, *shape) for shape in SHAPES[:4]]
    n_labeled = [s[0] for s in SHAPES[:4]]
    batch = collate_tasks(tasks, n_labeled)

    def loss_of(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits, -1)[..., 1][mask].sum()

    model.zero_grad()
    loss_of(model(batch), batch.unlabeled_mask).backward()
    batched = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    for task, labeled in zip(tasks, n_labeled, strict=True):
        single = collate_tasks([task], [labeled])
        loss_of(model(single), single.unlabeled_mask).backward()
    for name, parameter in model.named_parameters():
        assert torch.isfinite(batched[name]).all(), name
        torch.testing.assert_close(batched[name], parameter.grad, rtol=1e-4, atol=1e-5)


def test_activation_checkpointing_gives_the_same_gradients(small_model, rng) -> None:
    from trainer.activation_checkpointing import apply_activation_checkpointing

    model = PUICLModel(small_model.config, attention="bucketed")  # every block checkpointed
    model.load_state_dict(small_model.state_dict())
    batch = collate_tasks([random_task(rng, *s) for s in SHAPES[:3]], [s[0] for s in SHAPES[:3]])
    grads = []
    for checkpointed in (False, True):
        if checkpointed:
            apply_activation_checkpointing(model)
        model.zero_grad()
        model(batch)[batch.unlabeled_mask].sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert list(model.state_dict()) == list(small_model.state_dict())  # names unchanged
    for plain, recomputed in zip(*grads, strict=True):
        assert torch.equal(plain, recomputed)


def test_bfloat16_autocast_runs_and_stays_close(small_model, rng) -> None:
    batch = collate_tasks([random_task(rng, *s) for s in SHAPES[:3]], [s[0] for s in SHAPES[:3]])
    with torch.no_grad():
        exact = small_model(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = small_model(batch)
    assert low.dtype == torch.float32 and torch.isfinite(low).all()
    mask = batch.unlabeled_mask
    assert (low[mask] - exact[mask]).abs().max() < 0.25
    assert (low[~batch.row_mask] == 0).all()


def test_task_batch_masks_and_validation() -> None:
    batch = collate_tasks([np.ones((5, 2)), np.full((3, 4), 2.0)], [2, 1])
    assert batch.unlabeled_mask.tolist() == [
        [False, False, True, True, True],
        [False, True, True, False, False],
    ]
    assert batch.labeled_mask.sum().item() == 3 and batch.row_mask.sum().item() == 8
    assert batch.to("cpu").x.shape == (2, 5, 4)
    # zero padding: task 0's missing features, task 1's missing rows
    assert (batch.x[0, :, 2:] == 0).all() and (batch.x[1, 3:] == 0).all()
    assert batch.x[0, :, :2].sum() == 10 and batch.x[1, :3].sum() == 24
    with pytest.raises(ValueError, match="task 0 of the batch: needs at least one labeled and one"):
        collate_tasks([np.zeros((5, 2))], [5])
    with pytest.raises(ValueError, match="2 tasks but 1 n_labeled values"):
        collate_tasks([np.zeros((5, 2)), np.zeros((5, 2))], [1])
    bad = TaskBatch(batch.x, batch.n_labeled, torch.tensor([9, 3]), batch.n_features)
    with pytest.raises(ValueError, match="n_rows=9 exceeds the padded size 5"):
        bad.validate()


def test_query_rows_see_the_context_but_nothing_sees_them(small_model, rng) -> None:
    x = random_task(rng, 8, 22, 4)  # 8 labeled + 22 pool rows of context, then 8 queries
    context = 30
    queries = rng.normal(size=(8, 4)).astype(np.float32) + 0.5
    with torch.no_grad():
        full = small_model(collate_tasks([np.vstack([x, queries])], [8], n_context=[context]))[0]
    torch.testing.assert_close(full[:context], run_alone(small_model, x, 8), rtol=0, atol=1e-5)
    for index in range(len(queries)):  # a query's output does not depend on the others
        single = collate_tasks([np.vstack([x, queries[index : index + 1]])], [8], [context])
        with torch.no_grad():
            alone = small_model(single)[0]
        torch.testing.assert_close(full[context + index], alone[context], rtol=0, atol=1e-5)
    # and, as an unmasked extra row, it would change the context rows' outputs
    assert (run_alone(small_model, np.vstack([x, queries]), 8)[:context] - full[:context]).abs(
    ).max() > 1e-4
    with pytest.raises(ValueError, match=r"n_context=5 outside \[n_labeled=8, n_rows=38\]"):
        collate_tasks([np.vstack([x, queries])], [8], n_context=[5])
