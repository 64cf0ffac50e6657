"""Biased labeled positives (prior.labeling, prior_gen.labeling): off by default and out of the
hash; a biased task keeps its rows, sizes and π and labels positives with a high propensity
more often; its draws are the task's own. Worker-count and CPU-kernel determinism with the
option on: ALL_ON in test_mechanisms.py."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from prior_gen_testlib import SMOKE, data_digest, tiny_config

from prior_gen.columns import pseudo_exp
from prior_gen.config import LEGACY_VALUES, generation_config_from_mapping
from prior_gen.factors import plan_step
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.labeling import portable_log, propensities, race_keys
from puicl_common.configio import ConfigError

SMOKE_HASH = "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9"


def _config(probability: float = 0.5, strength=(1.0, 3.0)):
    return tiny_config(prior={"labeling": {"probability": probability,
                                           "strength": list(strength)}})


def _tasks(config, stages=(1, 2, 3, "tail"), steps=(0, 1)):
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def _sorted_rows(task) -> list[bytes]:
    pairs = zip(task.x, task.y, strict=True)
    return sorted(row.tobytes() + bytes([int(label)]) for row, label in pairs)


def test_absent_or_null_keeps_the_hash_and_a_section_enters_it() -> None:
    assert LEGACY_VALUES[("prior", "labeling")] is None
    assert tiny_config().prior.labeling is None and tiny_config().hash() == SMOKE_HASH
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["labeling"] = None
    assert generation_config_from_mapping(data).hash() == SMOKE_HASH
    hashes = {SMOKE_HASH, _config().hash(), _config(0.3).hash(), _config(0.5, (0, 1)).hash()}
    assert len(hashes) == 4


@pytest.mark.parametrize(
    ("labeling", "message"),
    [
        ({"probability": 1.5}, "prior.labeling.probability: must lie in [0, 1], got 1.5"),
        ({"strength": [3, 1]}, "prior.labeling.strength: lower bound 3.0 is above upper bound"),
        ({"strength": [-1, 2]}, "prior.labeling.strength: lower bound must be >= 0, got -1.0"),
        ({"strength": [1, float("inf")]}, "prior.labeling.strength: must be finite, got inf"),
        ({"slope": 2}, "prior.labeling.slope: unknown key"),
    ],
)
def test_bad_settings_are_errors_naming_the_key(labeling: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior={"labeling": labeling})
    assert message in str(err.value)


def test_biased_tasks_keep_rows_sizes_and_scar_tasks_keep_their_bytes() -> None:
    """A biased task holds the same rows as the task without the option (only which positives
    are labeled changes); the other tasks of the config are the same bytes."""
    tasks, plain = _tasks(_config(0.5)), _tasks(tiny_config())
    kinds = {t.meta["labeling"]["mechanism"] for t in tasks}
    assert kinds == {"sar", "scar"}
    for task, before in zip(tasks, plain, strict=True):
        assert task.n_labeled == before.n_labeled and task.meta["pi"] == before.meta["pi"]
        assert (task.y[: task.n_labeled] == 1).all()
        record = task.meta.pop("labeling")
        if record["mechanism"] == "scar":
            assert data_digest([task]) == data_digest([before])
            continue
        assert _sorted_rows(task) == _sorted_rows(before)
        assert task.meta["realized_pi"] == before.meta["realized_pi"]
        assert 1.0 <= record["slope"] <= 3.0 and len(record["direction"]) == task.n_features


def test_labeled_positives_have_the_higher_projection() -> None:
    """On the recorded direction, the labeled positives' mean projection exceeds the unlabeled
    positives' (the measured gaps on these tasks: docs/training.md §10; a uniform draw: ≈ 0)."""
    gaps = []
    for task in _tasks(_config(1.0)):
        direction = np.asarray(task.meta["labeling"]["direction"], np.float64)
        projection = task.x.astype(np.float64) @ direction
        positive = task.y == 1
        labeled = np.arange(task.n_rows) < task.n_labeled
        spread = projection[positive].std()
        gaps.append((projection[labeled].mean() - projection[positive & ~labeled].mean()) / spread)
    assert np.mean(gaps) > 0.5 and np.mean(np.asarray(gaps) > 0) > 0.9


def test_labeling_draws_are_the_tasks_own() -> None:
    config = _config(0.5)
    whole = generate_step(config, "train", 2, 1)
    for i in (0, 3, 7):
        alone = generate_tasks([plan_step(config, "train", 2, 1)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])


def test_the_race_draws_in_proportion_to_the_weights() -> None:
    """The smallest key is row i with probability w_i / Σw (50,000 races, fixed seed)."""
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    uniforms = np.random.default_rng(0).random((50_000, 4))
    first = np.argmin(race_keys(weights, uniforms), axis=1)
    shares = np.bincount(first, minlength=4) / first.shape[0]
    np.testing.assert_allclose(shares, weights / weights.sum(), atol=0.01)


def test_portable_log_is_the_log() -> None:
    values = np.concatenate([np.random.default_rng(1).random(10_000), [1.0, 0.5, 1e-300,
                                                                       2.0**-1074, 0.7071]])
    expected = np.log(values)
    np.testing.assert_allclose(portable_log(values), expected, rtol=1e-15, atol=0)


def test_propensities_are_the_logistic_of_the_standardized_projection() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 5)).astype(np.float32)
    positive = rng.random(300) < 0.6
    direction = rng.normal(size=5).astype(np.float32)
    projection = x.astype(np.float64) @ direction.astype(np.float64)
    z = (projection - projection[positive].mean()) / projection[positive].std()
    expected = 1 / (1 + pseudo_exp(-2.5 * z))
    np.testing.assert_allclose(propensities(x, positive, direction, 2.5), expected, rtol=1e-12)
    order = np.argsort(z)
    assert (np.diff(propensities(x, positive, direction, 2.5)[order]) >= 0).all()
