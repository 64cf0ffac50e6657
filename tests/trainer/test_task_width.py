"""A config whose tasks are wider than model.max_features is refused naming the key."""

from __future__ import annotations

import pytest
import yaml

from puicl_common.configio import ConfigError
from trainer.config import run_config_from_mapping

from .conftest import SMOKE


def _config(n_features=(3, 8), max_features: int = 30) -> dict:
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["dataset"]["n_features"] = list(n_features)
    data["model"]["max_features"] = max_features
    return data


def test_tasks_wider_than_the_model_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        run_config_from_mapping(_config(n_features=(3, 10), max_features=8))
    message = str(err.value)
    assert "prior.dataset.n_features: tasks of up to 10 features exceed model.max_features = 8" \
        in message and "\n" not in message


def test_tasks_that_fit_are_accepted() -> None:
    assert run_config_from_mapping(_config(max_features=8)).prior.dataset.n_features[1] == 8
