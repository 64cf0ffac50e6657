"""Training on wide tasks (prior.dataset.wide): a config whose widest task exceeds
model.max_features is refused naming both keys, and steps whose tasks differ in width train."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from prior_gen.cli import main as prior_gen_main
from prior_gen.shards import open_shards
from puicl_common.configio import ConfigError
from trainer.config import run_config_from_mapping
from trainer.metrics_log import read_metrics

from .conftest import SMOKE, run_inprocess

WIDE = {"probability": 0.5, "n_features": [12, 30]}


def _config(wide: dict | None = WIDE, n_features=(3, 8), max_features: int = 30) -> dict:
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["dataset"].update(n_features=list(n_features), wide=wide)
    data["model"]["max_features"] = max_features
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _config(max_features=20),
            "prior.dataset.wide.n_features: tasks of up to 30 features exceed "
            "model.max_features = 20",
        ),
        (
            _config(wide=None, n_features=(3, 10), max_features=8),
            "prior.dataset.n_features: tasks of up to 10 features exceed model.max_features = 8",
        ),
    ],
)
def test_tasks_wider_than_the_model_are_refused_naming_both_keys(data, message) -> None:
    with pytest.raises(ConfigError) as err:
        run_config_from_mapping(data)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_tasks_that_fit_are_accepted() -> None:
    assert run_config_from_mapping(_config()).prior.dataset.widest() == 30
    # never wide: the usual range is the widest
    never = run_config_from_mapping(_config({"probability": 0.0}, max_features=8))
    assert never.prior.dataset.widest() == 8


@pytest.mark.parametrize("backend", ["packed", "bucketed"])
def test_two_steps_train_on_steps_of_mixed_widths(tmp_path: Path, backend: str) -> None:
    data = _config()
    data["training"]["attention"] = backend
    config = tmp_path / "wide.yaml"
    config.write_text(yaml.safe_dump(data))
    shards = tmp_path / "shards"
    for args in (["--stages", "all"], ["--split", "val", "--stages", "1,3,tail", "--steps", "0-1"]):
        code = prior_gen_main(["--config", str(config), "--workers", "1", "--out", str(shards),
                               *args])  # fmt: skip
        assert code in (0, None)
    reader = open_shards(shards)
    widths = [{t.n_features for t in reader.read_step(1, step)} for step in (0, 1)]
    reader.close()
    assert all(len(w) > 1 and max(w) > 8 for w in widths)  # each step mixes wide and narrow
    assert run_inprocess(tmp_path / "run", shards, config=config, until_step=2) == 0
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    assert all(np.isfinite(r["loss"]) and r["grad_norm"] > 0 for r in train)
