"""Noisy labels (prior.label_noise, prior_gen.label_noise): off by default and out of the hash;
a noisy task keeps its rows, sizes and π and changes only which rows are positive, the more so
the larger its τ; the other tasks keep their bytes; its draws are the task's own. Worker-count
and CPU-kernel determinism with the option on: ALL_ON in test_mechanisms.py."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from prior_gen_testlib import SMOKE, data_digest, tiny_config

from prior_gen.config import LEGACY_VALUES, generation_config_from_mapping
from prior_gen.factors import plan_step
from prior_gen.generate import generate_step, generate_tasks
from puicl_common.configio import ConfigError

SMOKE_HASH = "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9"


def _config(probability: float = 0.5, scale=(0.0, 1.5), **prior):
    return tiny_config(
        prior={"label_noise": {"probability": probability, "scale": list(scale)}, **prior}
    )


def _tasks(config, stages=(1, 2, 3, "tail"), steps=(0, 1)):
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def _row_keys(task) -> list[bytes]:
    return [row.tobytes() for row in task.x]


def test_absent_or_null_keeps_the_hash_and_a_section_enters_it() -> None:
    assert LEGACY_VALUES[("prior", "label_noise")] is None
    assert tiny_config().prior.label_noise is None and tiny_config().hash() == SMOKE_HASH
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["label_noise"] = None
    assert generation_config_from_mapping(data).hash() == SMOKE_HASH
    hashes = {SMOKE_HASH, _config().hash(), _config(0.3).hash(), _config(0.5, (0, 1)).hash()}
    assert len(hashes) == 4


@pytest.mark.parametrize(
    ("label_noise", "message"),
    [
        ({"probability": -0.1}, "prior.label_noise.probability: must lie in [0, 1], got -0.1"),
        ({"scale": [2, 1]}, "prior.label_noise.scale: lower bound 2.0 is above upper bound"),
        ({"scale": [-1, 1]}, "prior.label_noise.scale: lower bound must be >= 0, got -1.0"),
        ({"scale": [0, float("nan")]}, "prior.label_noise.scale: must be finite, got nan"),
        ({"tau": 1}, "prior.label_noise.tau: unknown key"),
    ],
)
def test_bad_settings_are_errors_naming_the_key(label_noise: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior={"label_noise": label_noise})
    assert message in str(err.value)


def test_noisy_tasks_change_only_the_labels_and_clean_tasks_keep_their_bytes() -> None:
    """A noisy task holds the same feature rows, sizes and π as the task without the option;
    which of them are positive changes, more rows the larger τ. The clean tasks of the config
    are the same bytes."""
    tasks, plain = _tasks(_config(0.5)), _tasks(tiny_config())
    taus, flipped = [], []
    for task, before in zip(tasks, plain, strict=True):
        tau = task.meta.pop("label_noise")
        assert task.n_labeled == before.n_labeled and task.meta["pi"] == before.meta["pi"]
        assert (task.y[: task.n_labeled] == 1).all()
        if tau == 0.0:
            assert data_digest([task]) == data_digest([before])
            continue
        assert 0.0 <= tau <= 1.5
        # the same generated rows and the same negatives count; positive sets differ
        before_label = dict(zip(_row_keys(before), before.y.tolist(), strict=True))
        same_rows = [key in before_label for key in _row_keys(task)]
        negatives = np.count_nonzero(task.y == 0)
        assert negatives > 0
        shared = [before_label[k] != int(y) for k, y, s in
                  zip(_row_keys(task), task.y, same_rows, strict=True) if s]  # fmt: skip
        taus.append(tau)
        flipped.append(np.mean(shared) if shared else 0.0)
    assert len(taus) >= 8
    assert np.corrcoef(taus, flipped)[0, 1] > 0.5  # more noise, more changed labels
    assert max(flipped) > 0.1


def test_tasks_labeled_by_a_rule_are_not_noisy() -> None:
    config = _config(1.0, label_rule={"probability": 0.5})
    for task in _tasks(config):
        if task.meta["label_mechanism"] == "rule":
            assert task.meta["label_noise"] == 0.0
        else:
            assert task.meta["label_noise"] > 0.0


def test_label_noise_draws_are_the_tasks_own() -> None:
    config = _config(0.5)
    whole = generate_step(config, "train", 2, 1)
    for i in (0, 3, 7):
        alone = generate_tasks([plan_step(config, "train", 2, 1)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])
