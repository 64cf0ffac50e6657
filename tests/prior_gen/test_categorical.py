"""Categorical features (prior.dataset.categorical, prior_gen.mechanisms.categorical): levels,
shares, keys, versioning and determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prior_gen_testlib import REPO, SMOKE, data_digest, shard_digests, tiny_config

from prior_gen.config import (
    CategoricalConfig,
    DatasetConfig,
    generation_config_from_mapping,
    load_generation_config,
)
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.mechanisms.categorical import discretise_task
from prior_gen.paper.factors import plan_step
from prior_gen.runner import run_generation
from prior_gen.shards import open_shards
from puicl_common.configio import ConfigError, load_yaml

# Computed on the code before prior.dataset.categorical and the n_labeled size curriculum
# existed (commit 0e15d79, 2026-11-22): config hashes, and the data digest
# (prior_gen_testlib.data_digest) of step 1 of stages 1, 3 and the tail of configs/smoke.yaml
# and of step 0 of stages 1 and 20 of configs/puicl_cpu.yaml. Both configs use the native
# arithmetic, whose last bits follow the CPU's BLAS and SIMD kernels (docs/architecture.md §6),
# so the data digests are those of that commit on each CPU class it was run on: a 2-core AMD
# EPYC (AVX2) first, then an Intel Xeon with AVX-512 (2026-11-24). On another class, run
# commit 0e15d79 there and add its digests.
OLD_HASHES = {
    "smoke.yaml": "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
    "puicl_cpu.yaml": "3814e5b79d95bb13b593eb4d21d10072fff8adda67cb60c31989503f2fcccbca",
    "paper.yaml": "dce5954f9ecbcddbb856541e1c3acc08c75df7ad90f1149e71bd27a1b217783f",
}
OLD_SMOKE_TASKS = {
    "9fe602ae775cacc63fb395e4f834ce61b8f48fb914d1d07bf1f4643fef59b06e",  # AMD EPYC, AVX2
    "63ebd8cee87e12b421e6e460c411f0d52ab9307514a4eef632c11938c5c65d89",  # Intel Xeon, AVX-512
}
OLD_CPU_TASKS = {
    "df11a65420d40ad4356651b858f04480bb07bc10c4e3e7cf00dcbac971013631",  # AMD EPYC, AVX2
    "7a5967374eb2268f9c954f810edb93d279337b721b8ed5a763f248ed106d271d",  # Intel Xeon, AVX-512
}

CATEGORICAL = {"share": [0.2, 0.6], "levels": [2, 10]}


def _config(categorical=CATEGORICAL, **more):
    dataset = {"n_features": [6, 10], "n_labeled": [30, 60], "categorical": categorical}
    scm = {"depth": [4, 5], **more.pop("scm", {})}
    prior = {"dataset": dataset, "scm": scm, **more}
    return tiny_config(prior=prior, curriculum={"global_batch": 16})


# -- versioning: without the key, today's bytes and hashes ----------------------------------
@pytest.mark.parametrize("name", sorted(OLD_HASHES))
def test_configs_without_the_new_keys_keep_their_hash(name: str) -> None:
    config = load_generation_config(REPO / "configs" / name)
    assert config.prior.dataset.categorical is None
    assert config.hash() == OLD_HASHES[name]
    assert "categorical" not in config.identity()["prior"]["dataset"]
    assert DatasetConfig.LEGACY_VALUES["categorical"] is None


def test_configs_without_the_new_keys_keep_their_bytes() -> None:
    smoke = load_generation_config(SMOKE)
    tasks = [t for stage in (1, 3, "tail") for t in generate_step(smoke, "train", stage, 1)]
    assert data_digest(tasks) in OLD_SMOKE_TASKS
    cpu = load_generation_config(REPO / "configs" / "puicl_cpu.yaml")
    tasks = [t for stage in (1, 20) for t in generate_step(cpu, "train", stage, 0)]
    assert data_digest(tasks) in OLD_CPU_TASKS


def test_the_key_enters_the_hash_only_when_set() -> None:
    data = load_yaml(SMOKE)
    data["prior"]["dataset"]["categorical"] = None
    explicit_none = generation_config_from_mapping(data)
    assert explicit_none.hash() == OLD_HASHES["smoke.yaml"]
    data["prior"]["dataset"]["categorical"] = CATEGORICAL
    on = generation_config_from_mapping(data)
    assert on.identity()["prior"]["dataset"]["categorical"]["levels"] == [2, 10]
    data["prior"]["dataset"]["categorical"] = {**CATEGORICAL, "levels": [2, 9]}
    assert len({explicit_none.hash(), on.hash(), generation_config_from_mapping(data).hash()}) == 3


@pytest.mark.parametrize(
    "categorical, key, message",
    [
        ({"share": [0.5, 0.2]}, "share", "lo <= hi"),
        ({"share": [0.0, 1.5]}, "share", "<= 1"),
        ({"levels": [1, 10]}, "levels", ">= 2"),
        ({"levels": [6, 3]}, "levels", "above upper bound"),
        ({"shuffle_levels": 2.0}, "shuffle_levels", "[0, 1]"),
        ({"level": [2, 3]}, "level", "unknown key"),
    ],
)
def test_bad_categorical_settings_name_the_key(categorical, key: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(categorical)
    assert f"prior.dataset.categorical.{key}" in str(err.value)
    assert message in str(err.value)


# -- the features -----------------------------------------------------------------------------
def _tasks(config, stages=(1, 3, "tail"), steps=(0, 1)):
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def test_categorical_columns_hold_level_codes_and_the_others_are_untouched() -> None:
    config = _config()
    plain = _config(categorical=None)
    seen_levels: set[int] = set()
    several = columns_seen = 0
    for task, before in zip(_tasks(config), _tasks(plain), strict=True):
        columns = task.meta["categorical_features"]
        levels = task.meta["categorical_levels"]
        assert len(columns) == len(levels)
        assert np.array_equal(task.y, before.y) and task.n_labeled == before.n_labeled
        for j in range(task.n_features):
            if j not in columns:
                assert np.array_equal(task.x[:, j], before.x[:, j])
        for j, m in zip(columns, levels, strict=True):
            values = np.unique(task.x[:, j])
            # codes 0..m-1, every code used, 2..10 levels (fewer only if the latent ties)
            assert values.tolist() == list(range(m))
            assert 1 <= m <= 10
            assert m <= np.unique(before.x[:, j]).size
            several += m >= 2
            columns_seen += 1
            seen_levels.add(m)
    assert {2, 10} <= seen_levels  # both ends of the range occur
    # one level only where the cuts all fall into one tied block (e.g. relu's zeros)
    assert columns_seen > 100 and several > 0.9 * columns_seen


def test_levels_are_a_partition_of_the_latent_column() -> None:
    """Unshuffled codes follow the latent value's order: each level is an interval."""
    config = _config({"share": [1.0, 1.0], "levels": [3, 6], "shuffle_levels": 0.0})
    plain = _config(categorical=None)
    for task, before in zip(_tasks(config, stages=(2,)), _tasks(plain, stages=(2,)), strict=True):
        assert task.meta["categorical_features"] == list(range(task.n_features))
        for j in range(task.n_features):
            order = np.argsort(before.x[:, j], kind="stable")
            assert np.all(np.diff(task.x[order, j]) >= 0)  # monotone in the latent


def test_shuffled_codes_are_not_ordered_with_the_latent() -> None:
    config = _config({"share": [1.0, 1.0], "levels": [6, 6], "shuffle_levels": 1.0})
    plain = _config(categorical=None)
    monotone = total = 0
    for task, before in zip(_tasks(config, stages=(2,)), _tasks(plain, stages=(2,)), strict=True):
        for j in range(task.n_features):
            if task.meta["categorical_levels"][j] == 6:
                order = np.argsort(before.x[:, j], kind="stable")
                diffs = np.diff(task.x[order, j])
                monotone += bool(np.all(diffs >= 0) or np.all(diffs <= 0))
                total += 1
    assert total > 100 and monotone < 0.05 * total  # 2 of the 720 orders are monotone


def test_share_and_levels_follow_the_config() -> None:
    config = _config({"share": [0.1, 0.3], "levels": [3, 5]})
    chosen = total = 0
    counts: list[int] = []
    for task in _tasks(config, steps=(0, 1, 2, 3)):
        chosen += len(task.meta["categorical_features"])
        total += task.n_features
        counts += task.meta["categorical_levels"]
    assert 0.15 < chosen / total < 0.25  # E[share] = 0.2
    assert set(counts) == {3, 4, 5}
    assert all(abs(counts.count(k) / len(counts) - 1 / 3) < 0.1 for k in (3, 4, 5))
    none = _config({"share": [0.0, 0.0]})
    assert all(t.meta["categorical_features"] == [] for t in _tasks(none, stages=(1,)))


def test_ties_in_the_latent_give_dense_codes() -> None:
    from prior_gen.task import Task

    x = np.array([[0.0, 5.0], [0.0, 5.0], [1.0, 5.0], [1.0, 5.0], [2.0, 5.0]] * 4, np.float32)
    task = Task(x=x, y=np.ones(20, np.int8), n_labeled=5, meta={"seed_key": [0, 0, 1, 2, 7]})
    spec = CategoricalConfig(share=(1.0, 1.0), levels=(10, 10))
    out = discretise_task(task, spec)
    assert np.array_equal(task.x, x)  # the input is not modified
    assert out.meta["categorical_levels"][1] == 1 and np.all(out.x[:, 1] == 0)
    assert np.unique(out.x[:, 0]).tolist() == list(range(out.meta["categorical_levels"][0]))
    assert out.meta["categorical_levels"][0] <= 3


# -- keys and determinism ---------------------------------------------------------------------
def test_a_task_alone_equals_the_task_in_its_step() -> None:
    config = _config()
    whole = generate_step(config, "train", 2, 1)
    for i in (0, 7, 15):
        alone = generate_tasks([plan_step(config, "train", 2, 1)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])


def test_the_categorical_stream_is_its_own() -> None:
    """Other shares change which columns are discretised, never the continuous columns' values
    or the labels; the task's main stream is untouched."""
    a = _tasks(_config({"share": [0.3, 0.3]}), stages=(1,))
    b = _tasks(_config({"share": [0.6, 0.6]}), stages=(1,))
    for ta, tb in zip(a, b, strict=True):
        assert np.array_equal(ta.y, tb.y)
        assert set(ta.meta["categorical_features"]) <= set(tb.meta["categorical_features"])
        for j in set(range(ta.n_features)) - set(tb.meta["categorical_features"]):
            assert np.array_equal(ta.x[:, j], tb.x[:, j])


def test_portable_arithmetic_discretises_too() -> None:
    portable = _config(scm={"noise_sampler": "table", "arithmetic": "portable"})
    tasks = _tasks(portable, stages=(1,), steps=(0,))
    assert sum(len(t.meta["categorical_features"]) for t in tasks) > 0
    assert data_digest(tasks) == data_digest(_tasks(portable, stages=(1,), steps=(0,)))


@pytest.mark.slow  # a worker pool
def test_two_workers_give_the_same_bytes(tmp_path: Path) -> None:
    config = _config()
    stages = [1, 3, "tail"]
    run_generation(config, "train", stages, tmp_path / "one", workers=1)
    run_generation(config, "train", stages, tmp_path / "two", workers=2)
    assert shard_digests(tmp_path / "one") == shard_digests(tmp_path / "two")
    stored = open_shards(tmp_path / "two", split="train").read_step(3, 1)
    assert data_digest(stored) == data_digest(generate_step(config, "train", 3, 1))
