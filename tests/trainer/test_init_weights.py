"""``training.init_weights``: a fine-tuning run starts from exported weights (docs/training.md,
"Fine-tuning from weights") -- the weights it loads, the run identity, the errors, and a
fine-tuning run that resumes bit for bit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from puicl_common.configio import ConfigError
from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.weights import load_weights, save_weights
from trainer.config import load_run_config
from trainer.export import load_run_checkpoint
from trainer.state import init_model

from .conftest import SMOKE, run_inprocess, state_hash

TOTAL = 16  # smoke: 3 stages x 4 steps + 4 tail steps


def _weights(tmp_path: Path, seed: int, config: ModelConfig | None = None) -> Path:
    """A randomly initialised model of the smoke config (or ``config``), exported."""
    torch.manual_seed(seed)
    model = PUICLModel(config or load_run_config(SMOKE).model)
    return save_weights(model, tmp_path / f"weights-{seed}").parent


def _smoke_from(tmp_path: Path, weights: Path | str, name: str = "ft") -> Path:
    path = tmp_path / f"smoke-{name}.yaml"
    path.write_text(SMOKE.read_text().replace(
        "  activation_checkpointing: false\n",
        f"  activation_checkpointing: false\n  init_weights: '{weights}'\n",
    ))
    return path


def test_the_run_starts_from_the_weights_not_from_the_seed(tmp_path) -> None:
    weights = _weights(tmp_path, seed=5)
    expected = load_weights(weights).state_dict()
    tuned = init_model(load_run_config(_smoke_from(tmp_path, weights)), torch.device("cpu"))
    fresh = init_model(load_run_config(SMOKE), torch.device("cpu"))
    for name, tensor in tuned.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    assert any(not torch.equal(t, fresh.state_dict()[n]) for n, t in tuned.state_dict().items())


def test_the_identity_follows_the_weights_not_their_path(tmp_path) -> None:
    weights = _weights(tmp_path, seed=5)
    moved = tmp_path / "elsewhere"
    shutil.copytree(weights, moved)
    other = _weights(tmp_path, seed=6)
    base = load_run_config(SMOKE).training_hash()
    tuned = load_run_config(_smoke_from(tmp_path, weights, "a")).training_hash()
    assert tuned != base
    assert load_run_config(_smoke_from(tmp_path, moved, "b")).training_hash() == tuned
    assert load_run_config(_smoke_from(tmp_path, other, "c")).training_hash() != tuned


def test_weights_of_another_model_are_refused_by_key(tmp_path) -> None:
    wide = ModelConfig(**{**load_run_config(SMOKE).model.to_mapping(), "ff_dim": 48})
    weights = _weights(tmp_path, seed=5, config=wide)
    config = load_run_config(_smoke_from(tmp_path, weights))
    with pytest.raises(ConfigError, match=r"training\.init_weights.*ff_dim"):
        init_model(config, torch.device("cpu"))


def test_missing_weights_are_refused_by_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"training\.init_weights.*not found"):
        load_run_config(_smoke_from(tmp_path, tmp_path / "nowhere")).training_hash()


def test_a_fine_tuning_run_resumes_bit_for_bit(smoke_shards, tmp_path) -> None:
    config = _smoke_from(tmp_path, _weights(tmp_path, seed=5))
    reference = tmp_path / "reference"
    assert run_inprocess(reference, smoke_shards, config=config) == 0
    halves = tmp_path / "halves"
    assert run_inprocess(halves, smoke_shards, config=config, max_steps=TOTAL // 2) == 0
    assert run_inprocess(halves, smoke_shards, config=config) == 0
    assert state_hash(halves) == state_hash(reference)
    # and it trained something other than the run from the seed
    assert run_inprocess(tmp_path / "fresh", smoke_shards) == 0
    tuned = load_run_checkpoint(reference)[1]["model"]
    fresh = load_run_checkpoint(tmp_path / "fresh")[1]["model"]
    assert not torch.equal(tuned["decoder.2.weight"], fresh["decoder.2.weight"])
