"""RunConfig: every section of a run config, strictly validated, in sync with prior_gen."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from prior_gen.config import KNOWN_SECTIONS, load_generation_config
from puicl_common.configio import ConfigError
from puicl_common.runtime import resolve_precision
from trainer.config import RunConfig, TrainingConfig, load_run_config, run_config_from_mapping

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_run_config_sections_are_the_known_sections() -> None:
    assert tuple(f.name for f in dataclasses.fields(RunConfig)) == KNOWN_SECTIONS


SHIPPED = sorted(
    p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*.yaml") if p.name != "plan.yaml"
)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    # the trainer and prior-gen read the same generation sections
    assert config.generation() == load_generation_config(CONFIGS / name)


def test_paper_config_is_the_paper() -> None:
    config = load_run_config(CONFIGS / "paper.yaml")
    assert config.training == TrainingConfig(
        micro_batch_size=config.training.micro_batch_size,
        micro_batch_cells=config.training.micro_batch_cells,
        group_by_rows=config.training.group_by_rows,
        activation_checkpointing=config.training.activation_checkpointing,
        release_memory_above_gb=config.training.release_memory_above_gb,
        checkpoint_every=config.training.checkpoint_every,
        keep_checkpoints=config.training.keep_checkpoints,
        log_every=config.training.log_every,
        max_consecutive_skips=config.training.max_consecutive_skips,
        # the step's exchange, the same objective (the unit step: docs/training.md §6)
        gradient_sum="units",
        step_units=config.training.step_units,
    )  # optimizer, both schedules, EMA and sampler at the paper's values (the defaults)
    training = config.training
    assert (training.optimizer.beta1, training.optimizer.beta2) == (0.9, 0.95)
    assert training.optimizer.weight_decay == 1e-4 and training.optimizer.grad_clip == 1.0
    assert (training.phase1.peak_lr, training.phase1.floor_lr) == (1.6e-4, 1.6e-5)
    assert (training.phase1.warmup_steps, training.phase1.decay_power) == (4000, 1.5)
    assert (training.phase2.peak_lr, training.phase2.floor_lr) == (4e-5, 4e-6)
    assert training.phase2.warmup_steps == 2000 and training.ema_decay == 0.95
    assert config.curriculum.global_batch == 48


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"trainig": {}}, "trainig: unknown key"),
        (
            {"training": {"phase1": {"peak_lr": -1, "floor_lr": 0, "warmup_steps": 1}}},
            "training.phase1.peak_lr: must be positive",
        ),
        ({"training": {"phase1": {"peak_lr": 1e-3}}}, "training.phase1.floor_lr: missing"),
        (
            {"training": {"phase2": {"peak_lr": 1e-5, "floor_lr": 1e-4, "warmup_steps": 1}}},
            "training.phase2.floor_lr: must be in [0, peak_lr=1e-05]",
        ),
        ({"training": {"sampler": "random"}}, "training.sampler: must be one of 'sequential'"),
        ({"training": {"ema_decay": 1.0}}, "training.ema_decay: must be in [0, 1)"),
        ({"training": {"micro_batch_size": 0}}, "training.micro_batch_size: must be positive"),
        ({"training": {"optimizer": {"betas": [0.9, 0.95]}}}, "training.optimizer.betas: unknown"),
        ({"validation": {"stages": [1, 7]}}, "validation.stages[1]: stage 7 is outside 1..3"),
        ({"validation": {"stages": ["last"]}}, "validation.stages[0]:"),
        ({"validation": {"pi_buckets": [0.2, 1.0]}}, "validation.pi_buckets: must cover [0, 1]"),
        ({"model": {"num_heads": 3}}, "model.num_heads: must divide embed_dim"),
        ({"seed": -1}, "seed: must lie in 0..2**63-1"),
    ],
)
def test_errors_name_the_key(patch: dict, message: str) -> None:
    base = {
        "seed": 1,
        "curriculum": {"stages": 3, "steps_per_stage": 2, "tail_steps": 1, "global_batch": 4},
        "validation": {"stages": [1, "tail"]},
    }
    for key, value in patch.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    with pytest.raises(ConfigError) as err:
        run_config_from_mapping(base)
    assert message in str(err.value)


def test_load_error_names_the_file(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("training:\n  log_evry: 3\n")
    with pytest.raises(ConfigError, match=r"training.log_evry: unknown key .* \(in .*run.yaml\)"):
        load_run_config(path)


def test_training_hash_ignores_bookkeeping_only() -> None:
    base = run_config_from_mapping({"validation": {"stages": [1]}})
    same = run_config_from_mapping(
        {"validation": {"stages": [1], "every_steps": 7}, "training": {"log_every": 3}}
    )
    other = run_config_from_mapping(
        {"validation": {"stages": [1]}, "training": {"phase1": {"peak_lr": 1e-3,
                                                               "floor_lr": 0.0,
                                                               "warmup_steps": 1}}}
    )
    assert base.training_hash() == same.training_hash()
    assert base.training_hash() != other.training_hash()


def test_precision_spelled_either_way_gives_one_run() -> None:
    """float32 and bfloat16 are the project's words; fp32 and bf16, which stored configs
    hold, name the same precisions and give the same training hash."""
    def hashed(precision: str) -> str:
        config = run_config_from_mapping({"validation": {"stages": [1]},
                                          "training": {"precision": precision}})
        return config.training_hash()

    assert hashed("float32") == hashed("fp32") != hashed("bf16") == hashed("bfloat16")
    assert hashed("auto") not in (hashed("fp32"), hashed("bf16"))
    with pytest.raises(ConfigError, match=r"^training\.precision: must be one of"):
        hashed("half")
    cpu = torch.device("cpu")
    assert [resolve_precision(word, cpu) for word in ("bf16", "fp32", "auto")] == [
        "bfloat16", "float32", "float32"]


@pytest.mark.parametrize(
    "run", sorted(p.name for p in (CONFIGS.parent / "checkpoints").glob("*-run"))
)
def test_committed_runs_resume_with_the_stored_configs(run: str, monkeypatch) -> None:
    """configs/NAME.yaml (resolved) is the config of checkpoints/NAME-run: the trainer's
    resume check (training hash) and the shards' (generation hash) both accept it."""
    from trainer.checkpoint import CheckpointStore

    monkeypatch.chdir(CONFIGS.parent)  # training.init_weights paths are relative to the root
    config = load_run_config(CONFIGS / (run.removesuffix("-run").replace("-", "_") + ".yaml"))
    folder = CONFIGS.parent / "checkpoints" / run
    snapshot = load_run_config(folder / "config.yaml")
    assert snapshot.training_hash() == config.training_hash()
    assert snapshot.generation().hash() == config.generation().hash()
    found = CheckpointStore(folder / "checkpoints").latest()
    if found is None:
        # a relay folder before its first segment: its settings hold the hash it will resume by
        from relay.folder import read_settings

        assert read_settings(folder)["training_hash"] == config.training_hash()
        return
    _, payload = found
    assert payload["training_hash"] == config.training_hash()
    assert payload["generation_hash"] == config.generation().hash()
