"""PU task composition (§6.1), including datasets with too few negatives, and seeding."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.datasets import Dataset
from benchmark.protocol import composition, make_task, method_seed


def _dataset(n_pos: int, n_neg: int, slug: str = "synthetic") -> Dataset:
    rng = np.random.default_rng(0)
    y = np.array([1] * n_pos + [0] * n_neg, dtype=np.int8)
    X = rng.normal(size=(len(y), 3)) + y[:, None]
    X[:, 0] = np.arange(len(y))  # row id, to check which rows were drawn
    return Dataset(slug=slug, name=slug, X=X, y=y, feature_names=("id", "a", "b"),
                   categorical=(False, False, False), positive_label="1")


def test_composition_caps_positives_and_matches_negatives():
    assert composition(5000, 3000) == (200, 400, 400)


def test_composition_with_fewer_negatives_than_needed():
    # Car: 1594 positives, 134 negatives -> 200 labeled, 400 unlabeled positives, all 134 negs
    assert composition(1594, 134) == (200, 400, 134)
    # Haberman: 225 positives, 81 negatives -> 75 / 150 / 81
    assert composition(225, 81) == (75, 150, 81)


def test_make_task_with_fewer_negatives_than_needed():
    task = make_task(_dataset(n_pos=300, n_neg=50), repetition=0, root_seed=0)
    assert (task.n_labeled, task.n_u_pos, task.n_u_neg) == (100, 200, 50)
    assert task.pi == pytest.approx(50 / 250)
    # labeled positives first, then the pool; every labeled row is a positive
    assert task.s[:100].all() and not task.s[100:].any()
    assert (task.y_true[:100] == 1).all()
    # rows are drawn without replacement
    assert len(np.unique(task.X[:, 0])) == len(task.X)


def test_make_task_is_a_function_of_its_key():
    data = _dataset(n_pos=900, n_neg=700)
    a = make_task(data, repetition=3, root_seed=7)
    b = make_task(data, repetition=3, root_seed=7)
    assert a.fingerprint() == b.fingerprint()
    assert make_task(data, repetition=4, root_seed=7).fingerprint() != a.fingerprint()
    assert make_task(data, repetition=3, root_seed=8).fingerprint() != a.fingerprint()
    other = _dataset(n_pos=900, n_neg=700, slug="other")
    assert make_task(other, repetition=3, root_seed=7).fingerprint() != a.fingerprint()
    assert (a.n_labeled, a.n_u_pos, a.n_u_neg) == (200, 400, 400)


def test_pool_is_shuffled():
    task = make_task(_dataset(n_pos=900, n_neg=700), repetition=0, root_seed=0)
    pool = task.y_unlabeled
    # the classes are mixed: neither all positives first nor all negatives first
    assert 0 < pool[:400].sum() < 400
    assert 0 < pool[400:].sum() < 400


def test_method_seed_depends_on_every_key_part():
    base = method_seed(0, "adult", 1, "vpu")
    assert base == method_seed(0, "adult", 1, "vpu")
    assert len({base, method_seed(1, "adult", 1, "vpu"), method_seed(0, "car", 1, "vpu"),
                method_seed(0, "adult", 2, "vpu"), method_seed(0, "adult", 1, "tedn")}) == 5


def test_too_small_dataset_is_an_error():
    with pytest.raises(ValueError, match="too few rows"):
        composition(2, 0)
