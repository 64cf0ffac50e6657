"""Shards that cannot feed the run are refused with what differs and the command to run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from trainer.config import load_run_config
from trainer.sampler import StepSampler
from trainer.shard_check import ShardPlanError, check_train_shards, check_val_shards

from .conftest import SMOKE, generate, run_inprocess


def _config_variant(tmp_path: Path, old: str, new: str) -> Path:
    text = SMOKE.read_text()
    assert old in text
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace(old, new))
    return path


def _check(shards: Path, config_path: Path = SMOKE, start: int = 0, stop: int = 16,
           policy: str | None = None):
    config = load_run_config(config_path)
    sampler = StepSampler(policy or config.training.sampler, config.curriculum, config.seed)
    return check_train_shards(shards, config, config_path, sampler, start, stop)


def test_missing_directory_names_the_command(tmp_path, capsys) -> None:
    missing = tmp_path / "nowhere"
    assert run_inprocess(tmp_path / "run", missing) == 2
    err = capsys.readouterr().err
    command = f"prior-gen --config {SMOKE} --stages 1-3,tail --steps 0-3 --out {missing}"
    assert f"shard directory {missing} does not exist; generate them with: {command}\n" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_segment_needs_only_its_own_steps(tmp_path) -> None:
    shards = tmp_path / "part"
    generate(shards, "--stages", "1", "--steps", "0-1")
    _check(shards, stop=2)  # steps 0..1: present
    with pytest.raises(ShardPlanError) as err:
        _check(shards, start=1, stop=6)  # reads stage 1 steps 1-3 and stage 2 step 0-1
    message = str(err.value)
    assert "lacks steps that training steps 1..5 reads (stage 1: steps 2-3; stage 2: steps 0-1)" \
        in message
    assert f"prior-gen --config {SMOKE} --stages 1 --steps 2-3 --out {shards}" in message
    assert f"prior-gen --config {SMOKE} --stages 2 --steps 0-1 --out {shards}" in message
    # the printed commands are runnable and produce exactly what was missing
    for line in message.splitlines():
        if line.strip().startswith("prior-gen"):
            generate(shards, *shlex.split(line.strip())[3:-2])
    _check(shards, start=1, stop=6)


def test_sampler_policy_decides_what_is_needed(tmp_path) -> None:
    shards = tmp_path / "final"
    generate(shards, "--stages", "3,tail")
    _check(shards, policy="final_stage")  # phase 1 draws from stage 3 only
    with pytest.raises(ShardPlanError, match="stage 1: steps 0-3; stage 2: steps 0-3"):
        _check(shards, policy="sequential")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("global_batch: 8", "global_batch: 4",
         "hold 8 tasks per step, but {config} trains on curriculum.global_batch=4"),
        ("stages: 3\n", "stages: 4\n", "were generated for 3 curriculum stages, but {config} "
         "has curriculum.stages=4"),
        ("seed: 0", "seed: 1", "were generated from config hash"),
        ("n_labeled: [16, 32]", "n_labeled: [16, 33]", "prior.dataset.n_labeled"),
    ],
)
def test_mismatched_shards_say_what_differs(smoke_shards, tmp_path, old, new, message) -> None:
    config = _config_variant(tmp_path, old, new)
    with pytest.raises(ShardPlanError) as err:
        _check(smoke_shards, config, stop=1)
    assert message.format(config=config) in str(err.value)
    assert f"prior-gen --config {config} --out NEW_DIR" in str(err.value)


def test_validation_split_is_checked(tmp_path) -> None:
    shards = tmp_path / "train_only"
    generate(shards, "--stages", "1", "--steps", "0-0")
    config = load_run_config(SMOKE)
    with pytest.raises(ShardPlanError) as err:
        check_val_shards(shards, config, SMOKE)
    assert "has no 'val' split" in str(err.value)
    assert (f"prior-gen --config {SMOKE} --split val --stages 1,3,tail --steps 0-1 "
            f"--out {shards}") in str(err.value)
    # only that command: not one that would generate the whole curriculum's val split
    assert str(err.value).count("prior-gen") == 1
    generate(shards, "--split", "val", "--stages", "1,3", "--steps", "0-1")
    with pytest.raises(ShardPlanError, match=r"\(stage tail: steps 0-1\)"):
        check_val_shards(shards, config, SMOKE)
