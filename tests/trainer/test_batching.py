"""Rank slices, micro-batch plans and the per-task loss (and its scaling)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from trainer.batching import (
    MicroBatch,
    collate_with_targets,
    micro_batches,
    plan_micro_batches,
    rank_slice,
)
from trainer.loss import loss_index, per_task_loss


@dataclass
class FakeTask:
    """Shape of prior_gen's Task, enough for the batching helpers."""

    x: np.ndarray
    y: np.ndarray
    n_labeled: int


def _tasks(seed: int, count: int) -> list[FakeTask]:
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(count):
        n_labeled = int(rng.integers(3, 8))
        n_unlabeled = int(rng.integers(4, 15))
        d = int(rng.integers(2, 6))
        x = rng.normal(size=(n_labeled + n_unlabeled, d)).astype(np.float32)
        y = np.r_[np.ones(n_labeled), rng.integers(0, 2, n_unlabeled)].astype(np.int8)
        tasks.append(FakeTask(x, y, n_labeled))
    return tasks


def test_rank_slices_cover_the_batch_exactly() -> None:
    assert [rank_slice(48, r, 4) for r in range(4)] == [(0, 12), (12, 24), (24, 36), (36, 48)]
    assert rank_slice(8, 0, 1) == (0, 8)
    with pytest.raises(ValueError, match="48 tasks does not split evenly over 5 processes"):
        rank_slice(48, 0, 5)


def test_micro_batch_plans() -> None:
    rows = [50, 10, 30, 10, 90]
    features = [4, 4, 4, 4, 4]
    assert plan_micro_batches(rows, features, 2, None, group_by_rows=False) == [
        [0, 1], [2, 3], [4]
    ]
    # grouped: by row count, ties in original order
    assert plan_micro_batches(rows, features, 2, None, group_by_rows=True) == [
        [1, 3], [2, 0], [4]
    ]
    # cell bound (rows * 5 cells): 50+50 fit in 100, then 150 alone, 250 alone, 450 alone
    assert plan_micro_batches(rows, features, 8, 100, group_by_rows=True) == [
        [1, 3], [2], [0], [4]
    ]
    plan = plan_micro_batches(rows, features, 3, 400, group_by_rows=True)
    assert sorted(i for group in plan for i in group) == list(range(5))


def test_per_task_loss_is_the_mean_over_each_tasks_unlabeled_rows() -> None:
    tasks = _tasks(0, 4)
    batch, targets, unlabeled = collate_with_targets(tasks)
    assert torch.equal(unlabeled, batch.unlabeled_mask)
    logits = torch.randn(batch.x.shape[0], batch.x.shape[1], 2)
    logits[~unlabeled] = float("nan")  # labeled and padded positions must not leak
    losses = per_task_loss(logits, targets, unlabeled)
    for b, task in enumerate(tasks):
        rows = slice(task.n_labeled, task.x.shape[0])
        expected = F.cross_entropy(logits[b, rows], torch.as_tensor(task.y[rows]).long())
        assert losses[b].item() == pytest.approx(expected.item(), rel=1e-6)


def test_gradient_does_not_depend_on_the_micro_batch_layout() -> None:
    """(W/G) * sum over micro-batches == the global mean for any split (the DDP argument)."""
    torch.manual_seed(0)
    model = PUICLModel(ModelConfig(embed_dim=16, num_layers=1, num_heads=2, ff_dim=32))
    tasks = _tasks(1, 6)

    def gradient(groups: list[list[int]]) -> torch.Tensor:
        model.zero_grad()
        for group in groups:
            batch, targets, unlabeled = collate_with_targets([tasks[i] for i in group])
            (per_task_loss(model(batch), targets, unlabeled).sum() / len(tasks)).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    whole = gradient([list(range(6))])
    split = gradient(plan_micro_batches([t.x.shape[0] for t in tasks], [3] * 6, 2))
    assert torch.allclose(whole, split, rtol=1e-5, atol=1e-7)
    assert whole.abs().sum() > 0


def test_the_precomputed_loss_index_gives_the_masked_loss_and_gradients_bit_for_bit() -> None:
    # the loss as it was computed before the index: a boolean mask selection
    def masked_loss(logits, targets, unlabeled):
        row_loss = F.cross_entropy(logits.float()[unlabeled], targets[unlabeled], reduction="none")
        counts = unlabeled.sum(dim=1)
        task = torch.repeat_interleave(torch.arange(len(counts)), counts)
        return torch.zeros(len(counts)).index_add(0, task, row_loss) / counts.float()

    micro = MicroBatch.collate(_tasks(3, 5))
    positions, task_of_row, counts = micro.index
    assert torch.equal(positions, micro.unlabeled.flatten().nonzero().squeeze(1))
    assert torch.equal(counts, micro.unlabeled.sum(dim=1))
    assert torch.equal(task_of_row, torch.repeat_interleave(torch.arange(5), counts))
    base = torch.randn(*micro.unlabeled.shape, 2)
    base[~micro.unlabeled] = float("nan")  # labeled and padded positions must not leak
    results = []
    for loss in (
        lambda lg: masked_loss(lg, micro.targets, micro.unlabeled),
        lambda lg: per_task_loss(lg, micro.targets, micro.unlabeled, micro.index),
        lambda lg: per_task_loss(lg, micro.targets, micro.unlabeled),
    ):
        logits = base.clone().requires_grad_(True)
        value = loss(logits)
        (value * torch.arange(1.0, 6.0)).sum().backward()
        results.append((value.detach(), logits.grad.nan_to_num(nan=-1.0)))
    for value, grad in results[1:]:
        assert torch.equal(value, results[0][0])
        assert torch.equal(grad, results[0][1])
    assert torch.isfinite(results[0][0]).all()


def test_a_task_without_unlabeled_rows_is_refused() -> None:
    unlabeled = torch.tensor([[False, True, True], [False, False, False]])
    with pytest.raises(ValueError, match="without unlabeled rows"):
        loss_index(unlabeled)


def test_micro_batches_bound_the_cells() -> None:
    # cells: 10*3=30, 10*3=30, 50*5=250, 5*2=10, 5*2=10
    groups = micro_batches([10, 10, 50, 5, 5], [2, 2, 4, 1, 1], max_cells=64)
    assert groups == [[0, 1], [2], [3, 4]]
