"""Columns as real tables have them (prior.dataset.columns, prior_gen.columns): each mechanism
does what it claims, the labels and the other columns are untouched, and it is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from prior_gen_testlib import data_digest, tiny_config

from prior_gen.columns import pseudo_exp
from prior_gen.generate import generate_step
from prior_gen.mechanisms_config import COLUMN_MECHANISMS, ColumnsConfig

OFF = dict.fromkeys(COLUMN_MECHANISMS, 0.0)


def _tasks(columns: dict, stages=(1, 2, 3), steps=(0, 1)):
    config = tiny_config(prior={"dataset": {"n_features": [4, 8], "columns": columns}})
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def _plain(stages=(1, 2, 3), steps=(0, 1)):
    config = tiny_config(prior={"dataset": {"n_features": [4, 8]}})
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def test_the_config_has_one_probability_per_mechanism_in_order() -> None:
    names = [name for name in ColumnsConfig.__dataclass_fields__ if name != "max_columns"]
    assert tuple(names) == COLUMN_MECHANISMS


def _check(name: str, new: np.ndarray, old: np.ndarray, record: dict, task) -> None:
    if name == "skewed":  # ±E(s·x): of one sign, monotone in the latent
        sign = np.sign(new.mean())
        assert (sign * new > 0).all()
        assert (sign * np.diff(new[np.argsort(old, kind="stable")]) >= 0).all()
    elif name == "heavy_tailed":
        assert np.array_equal(np.sign(new), np.sign(old)) and (np.abs(new) >= np.abs(old)).all()
    elif name in ("integer", "count"):
        assert np.array_equal(new, np.round(new))
        if name == "count":
            assert (new >= 0).all()
    elif name == "low_cardinality":
        assert np.unique(new).size <= 6
        assert (np.diff(new[np.argsort(old, kind="stable")]) >= 0).all()
    elif name == "noise":
        assert abs(np.corrcoef(new, old)[0, 1]) < 0.5
    else:
        source = task.x[:, record["sources"][0]]
        if name == "duplicate":
            assert np.array_equal(new, source)
        elif name == "near_duplicate":
            assert 0 < np.abs(new - source).max() < 0.5
        elif name == "scaled_copy":
            assert abs(np.corrcoef(new, source)[0, 1]) > 0.999
        else:
            other = task.x[:, record["sources"][1]]
            assert np.allclose(np.abs(new), np.abs(source + other), atol=1e-4) or np.allclose(
                np.abs(new), np.abs(source - other), atol=1e-4
            )


@pytest.mark.parametrize("name", COLUMN_MECHANISMS)
def test_each_mechanism_does_what_it_claims(name: str) -> None:
    # copies with one target each: their sources then hold the values they were copied from
    copies = name in ("duplicate", "near_duplicate", "scaled_copy", "sum")
    tasks = _tasks({**OFF, name: 1.0, "max_columns": 1 if copies else 2})
    changed = 0
    for task, before in zip(tasks, _plain(), strict=True):
        assert np.array_equal(task.y, before.y) and task.n_labeled == before.n_labeled
        records = task.meta["column_mechanisms"]
        assert {r["mechanism"] for r in records} <= {name}
        touched = {r["column"] for r in records}
        for j in range(task.n_features):
            if j not in touched:
                assert np.array_equal(task.x[:, j], before.x[:, j])
        for record in records:
            j = record["column"]
            _check(name, task.x[:, j].astype(np.float64), before.x[:, j], record, task)
            assert np.isfinite(task.x[:, j]).all()
            changed += 1
    assert changed >= len(tasks)


def _skewness(values: np.ndarray) -> float:
    centered = values - values.mean()
    return float(np.mean(centered**3) / max(values.std(), 1e-12) ** 3)


def test_skewed_and_heavy_tailed_columns_are_skewed_and_heavy_tailed() -> None:
    skews, kurtoses = [], []
    for name, out in (("skewed", skews), ("heavy_tailed", kurtoses)):
        for task in _tasks({**OFF, name: 1.0, "max_columns": 2}):
            for record in task.meta["column_mechanisms"]:
                values = task.x[:, record["column"]].astype(np.float64)
                z = (values - values.mean()) / max(values.std(), 1e-12)
                out.append(abs(_skewness(values)) if name == "skewed" else float(np.mean(z**4)))
    assert np.median(skews) > 1.0  # a normal's is 0
    assert np.median(kurtoses) > 4.0  # a normal's is 3


def test_probabilities_and_column_counts_follow_the_config() -> None:
    tasks = _tasks({**OFF, "integer": 0.5, "noise": 0.5, "max_columns": 3})
    used = [{r["mechanism"] for r in t.meta["column_mechanisms"]} for t in tasks]
    for name in ("integer", "noise"):
        assert 0.3 < sum(name in u for u in used) / len(tasks) < 0.7
    counts = {sum(r["mechanism"] == "integer" for r in t.meta["column_mechanisms"]) for t in tasks}
    assert counts == {0, 1, 2, 3}


def test_columns_are_deterministic_and_their_stream_is_the_tasks_own() -> None:
    columns = {"max_columns": 2}
    assert data_digest(_tasks(columns)) == data_digest(_tasks(columns))
    # other probabilities change which columns are touched, never the labels or the rows
    for a, b in zip(_tasks(columns), _tasks({**columns, "sum": 0.9}), strict=True):
        assert np.array_equal(a.y, b.y)


def test_pseudo_exp_is_close_to_exp_and_monotone() -> None:
    y = np.linspace(-5, 5, 1001)
    assert np.allclose(pseudo_exp(y), np.exp(y), rtol=0.2)
    assert (np.diff(pseudo_exp(np.linspace(-70, 70, 10001))) >= 0).all()
    assert np.isfinite(pseudo_exp(np.array([1e30, -1e30]))).all()
