"""Removed training options (Muon, the WSD schedule, checkpoint averaging: docs/recipe.md):
a config that sets one is refused naming the key, one at the legacy value still loads, and
no stored config changes its training hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from puicl_common.configio import ConfigError, load_yaml, strip_removed_keys
from trainer.checkpoint import CheckpointError, CheckpointStore
from trainer.config import RunConfig, load_run_config, run_config_from_mapping
from trainer.export import exported_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

# the training hashes of the shipped configs before any of these options existed (commit
# 0e15d79): neither adding nor removing an option may change them, or old runs could no
# longer resume. smoke.yaml and paper.yaml have trained with the unit step since
# (training.gradient_sum: units, a new value: docs/decisions.md); at the legacy value they
# keep these hashes (test below)
SHIPPED_HASHES = {
    "smoke.yaml": "baae8f308498431b0fb9a0b8cc6503ef6242d6be0aee144b8b485238e78cecfd",
    "puicl_cpu.yaml": "5b7f5fbea69fe67edcb8147b0d03507ba16cfd9ee68b584f7c532c2cfd75e0bd",
    "paper.yaml": "7a3de53e3471a72b6e18f21abdf3fd8a54eb6589e072ad26f1e3a79d91873485",
}
UNIT_STEP = {"smoke.yaml", "paper.yaml"}  # switched to gradient_sum: units


def _at_legacy_step(name: str):
    data = load_yaml(CONFIGS / name)
    data["training"] = {**data["training"], "gradient_sum": "all_reduce", "step_units": None}
    return run_config_from_mapping(data)


@pytest.mark.parametrize("name", sorted(SHIPPED_HASHES))
def test_shipped_configs_keep_their_training_hash(name: str) -> None:
    config = _at_legacy_step(name) if name in UNIT_STEP else load_run_config(CONFIGS / name)
    assert config.training_hash() == SHIPPED_HASHES[name]


@pytest.mark.parametrize("name", sorted(UNIT_STEP))
def test_the_unit_step_enters_the_training_hash(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    assert config.training.gradient_sum == "units"
    assert config.training_hash() != SHIPPED_HASHES[name]
    # its padding and graphs change float rounding only: out of the hash
    data = load_yaml(CONFIGS / name)
    data["training"] = {**data["training"], "unit_shapes": {"rows": [512], "features": [20]},
                        "unit_graphs": "compile"}
    assert run_config_from_mapping(data).training_hash() == config.training_hash()


def _config(training: dict):
    return run_config_from_mapping({"validation": {"stages": [1]}, "training": training})


@pytest.mark.parametrize(
    ("training", "key"),
    [
        ({"optimizer": {"name": "muon"}}, "training.optimizer.name"),
        ({"optimizer": {"muon_lr": 3.0e-3}}, "training.optimizer.muon_lr"),
        ({"schedule": "wsd"}, "training.schedule"),
        ({"wsd": {"peak_lr": 3.0e-3}}, "training.wsd"),
        ({"average": "last_checkpoints"}, "training.average"),
        ({"average_last": 3}, "training.average_last"),
    ],
)
def test_a_config_naming_a_removed_option_is_refused_naming_the_key(
    training: dict, key: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _config(training)
    message = str(err.value)
    assert message.startswith(f"{key}: removed")
    assert "docs/recipe.md" in message and "\n" not in message


def test_removed_keys_at_their_legacy_values_load_with_the_same_hash() -> None:
    # what the trainer wrote into every run directory's config.yaml before the removal
    legacy = {
        "optimizer": {"name": "adamw", "muon_lr": 0.001, "muon_momentum": 0.95,
                      "muon_nesterov": True, "muon_weight_decay": 0.01, "muon_ns_steps": 5,
                      "muon_adjust_lr": "match_rms_adamw"},
        "schedule": "warmup_power",
        "wsd": {"peak_lr": 0.001, "floor_lr": 0.0, "warmup_steps": 100,
                "decay_fraction": 0.2, "decay_shape": "linear"},
        "average": "ema",
        "average_last": 10,
    }
    assert _config(legacy) == _config({})
    assert _config(legacy).training_hash() == _config({}).training_hash()


def test_a_stored_config_is_read_without_its_removed_keys_at_any_value() -> None:
    # what a checkpoint of a run that used the options recorded: compared with today's config
    # when a resume is refused, never refused itself
    stored = {"seed": 3, "model": {"norm": "pre_rmsnorm", "embed_dim": 64},
              "training": {"average": "last_checkpoints", "ema_decay": 0.9,
                           "optimizer": {"name": "muon", "beta1": 0.8}}}
    assert strip_removed_keys(RunConfig, stored) == {
        "seed": 3, "model": {"embed_dim": 64},
        "training": {"ema_decay": 0.9, "optimizer": {"beta1": 0.8}}}
    assert stored["training"]["optimizer"]["name"] == "muon"  # the caller's mapping is kept


def test_export_refuses_a_run_that_asked_for_checkpoint_averaging(tmp_path) -> None:
    store = CheckpointStore(tmp_path / "run" / "checkpoints")
    store.save(4, {"config": {"training": {"average": "last_checkpoints"}}})
    with pytest.raises(CheckpointError, match=r"training\.average: last_checkpoints, which was"):
        exported_model(tmp_path / "run")
