"""The training recipe options (docs/training.md, "Recipe options"): Muon, the WSD schedule
and the mean of the last checkpoints -- their config keys, their hash rule, and runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from puicl_common.configio import ConfigError
from puicl_model.weights import load_weights
from trainer.averaging import mean_weights
from trainer.cli import main as trainer_cli
from trainer.config import TrainingConfig, WSDSchedule, load_run_config, run_config_from_mapping
from trainer.export import load_run_checkpoint
from trainer.loop import init_model
from trainer.optimizers import (
    MuonWithAdamW,
    build_optimizer,
    muon_parameter_names,
    set_learning_rate,
)
from trainer.sampler import RunPlan
from trainer.schedule import learning_rate, wsd_learning_rate

from .conftest import SMOKE, muon_smoke, run_inprocess, state_hash

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TOTAL = 16  # smoke: 3 stages x 4 steps + 4 tail steps

# the training hashes of the shipped configs before these options existed (commit 0e15d79):
# a new key at its default must not change them, or old runs could no longer resume
SHIPPED_HASHES = {
    "smoke.yaml": "baae8f308498431b0fb9a0b8cc6503ef6242d6be0aee144b8b485238e78cecfd",
    "puicl_cpu.yaml": "5b7f5fbea69fe67edcb8147b0d03507ba16cfd9ee68b584f7c532c2cfd75e0bd",
    "paper.yaml": "7a3de53e3471a72b6e18f21abdf3fd8a54eb6589e072ad26f1e3a79d91873485",
}


def _smoke_with(tmp_path: Path, name: str, training_lines: str) -> Path:
    """The smoke config with ``training_lines`` added to its training section."""
    path = tmp_path / f"smoke-{name}.yaml"
    path.write_text(SMOKE.read_text().replace(
        "  activation_checkpointing: false\n",
        "  activation_checkpointing: false\n" + training_lines,
    ))
    return path


# ----------------------------------------------------------------- config and hash ----------
@pytest.mark.parametrize("name", sorted(SHIPPED_HASHES))
def test_shipped_configs_keep_their_training_hash(name: str) -> None:
    assert load_run_config(CONFIGS / name).training_hash() == SHIPPED_HASHES[name]


def _hash(training: dict) -> str:
    return run_config_from_mapping(
        {"validation": {"stages": [1]}, "training": training}
    ).training_hash()


def test_new_keys_enter_the_hash_only_when_they_change_training() -> None:
    base = _hash({})
    # at today's behaviour, spelled out or not: the same hash
    assert _hash({"optimizer": {"name": "adamw"}, "schedule": "warmup_power"}) == base
    # unused under adamw / warmup_power: no effect on training, no effect on the hash
    assert _hash({"optimizer": {"muon_lr": 0.5}, "wsd": {"peak_lr": 0.5}}) == base
    # export-only: may change between segments
    assert _hash({"average": "last_checkpoints", "average_last": 2, "keep_checkpoints": 2}) == base
    muon = _hash({"optimizer": {"name": "muon"}})
    wsd = _hash({"schedule": "wsd"})
    assert len({base, muon, wsd}) == 3
    assert _hash({"optimizer": {"name": "muon", "muon_lr": 0.5}}) != muon
    assert _hash({"optimizer": {"name": "muon", "muon_momentum": 0.9}}) != muon
    assert _hash({"schedule": "wsd", "wsd": {"decay_shape": "cosine"}}) != wsd
    # under wsd the phases are unused
    assert _hash({"schedule": "wsd", "phase1": {"peak_lr": 1.0, "floor_lr": 0.0,
                                                "warmup_steps": 1}}) == wsd


@pytest.mark.parametrize(
    ("training", "message"),
    [
        ({"optimizer": {"name": "sgd"}}, "training.optimizer.name: must be one of 'adamw'"),
        ({"optimizer": {"muon_lr": 0}}, "training.optimizer.muon_lr: must be positive"),
        ({"optimizer": {"muon_momentum": 1.0}}, "training.optimizer.muon_momentum: must be in"),
        ({"optimizer": {"muon_weight_decay": -1}}, "training.optimizer.muon_weight_decay: must"),
        ({"optimizer": {"muon_ns_steps": 0}}, "training.optimizer.muon_ns_steps: must be"),
        ({"optimizer": {"muon_adjust_lr": "x"}}, "training.optimizer.muon_adjust_lr: must be"),
        ({"schedule": "cosine"}, "training.schedule: must be one of 'warmup_power'"),
        ({"wsd": {"decay_fraction": 1.5}}, "training.wsd.decay_fraction: must be in [0, 1]"),
        ({"wsd": {"floor_lr": 1.0}}, "training.wsd.floor_lr: must be in [0, peak_lr="),
        ({"wsd": {"decay_shape": "exp"}}, "training.wsd.decay_shape: must be one of"),
        ({"average": "swa"}, "training.average: must be one of 'ema'"),
        ({"average_last": 0}, "training.average_last: must be positive"),
        (
            {"average": "last_checkpoints", "average_last": 5, "keep_checkpoints": 3},
            "training.average_last: averages 5 checkpoints but keep_checkpoints keeps only 3",
        ),
    ],
)
def test_recipe_errors_name_the_key(training: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        run_config_from_mapping({"validation": {"stages": [1]}, "training": training})
    assert message in str(err.value)


# ----------------------------------------------------------------- WSD schedule -------------
LINEAR = WSDSchedule(peak_lr=1.0, floor_lr=0.1, warmup_steps=10, decay_fraction=0.2)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.1),  # warmup: (t + 1) / W of the peak
        (4, 0.5),
        (9, 1.0),  # warmup's last step reaches the peak
        (10, 1.0),  # stable
        (79, 1.0),  # the stable phase's last step: the decay is the last 20 of 100 steps
        (80, 0.1 + 0.9 * 0.95),
        (89, 0.1 + 0.9 * 0.5),
        (99, 0.1),  # the run's last step trains at exactly the floor
    ],
)
def test_wsd_linear_at_key_steps(step: int, expected: float) -> None:
    assert wsd_learning_rate(step, 100, LINEAR) == pytest.approx(expected, rel=1e-12)


def test_wsd_cosine_overlap_and_edges() -> None:
    cosine = WSDSchedule(peak_lr=1.0, floor_lr=0.1, warmup_steps=10, decay_fraction=0.2,
                         decay_shape="cosine")
    assert wsd_learning_rate(79, 100, cosine) == 1.0
    assert wsd_learning_rate(84, 100, cosine) == pytest.approx(0.1 + 0.9 * (1 + 0.5**0.5) / 2)
    assert wsd_learning_rate(89, 100, cosine) == pytest.approx(0.55)
    assert wsd_learning_rate(99, 100, cosine) == pytest.approx(0.1, abs=1e-15)
    # a run shorter than warmup + decay: the smaller of the two curves
    short = WSDSchedule(peak_lr=1.0, floor_lr=0.1, warmup_steps=8, decay_fraction=0.5)
    assert wsd_learning_rate(5, 10, short) == pytest.approx(0.75)  # warmup 6/8 < decay 0.82
    assert wsd_learning_rate(7, 10, short) == pytest.approx(0.46)  # decay 0.1 + 0.9 * 2/5
    flat = WSDSchedule(peak_lr=1.0, floor_lr=0.0, warmup_steps=0, decay_fraction=0.0)
    assert [wsd_learning_rate(t, 3, flat) for t in range(3)] == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="outside the run's 100 steps"):
        wsd_learning_rate(100, 100, LINEAR)


def test_wsd_spans_both_phases_of_the_plan() -> None:
    plan = RunPlan(num_stages=4, steps_per_stage=20, tail_steps=20)  # 80 + 20 steps
    training = TrainingConfig(schedule="wsd", wsd=LINEAR)
    rates = [learning_rate(t, plan, training) for t in range(plan.total_steps)]
    assert rates == [wsd_learning_rate(t, 100, LINEAR) for t in range(100)]
    assert rates[80] == pytest.approx(0.955)  # the tail's first step does not restart warmup


# ----------------------------------------------------------------- Muon ---------------------
def test_muon_trains_exactly_the_linear_weights_of_the_blocks() -> None:
    config = load_run_config(SMOKE)
    model = init_model(config, torch.device("cpu"))
    expected = {
        f"{name}.weight"
        for name, module in model.named_modules()
        if name.startswith("blocks.") and isinstance(module, nn.Linear)
    }
    assert set(muon_parameter_names(model)) == expected
    assert len(expected) == 2 * 6  # per block: 2 x (qkv, out) + 2 feed-forward linears
    training = TrainingConfig(
        optimizer=dataclasses.replace(config.training.optimizer, name="muon", muon_lr=0.02)
    )
    optimizer = build_optimizer(model, training)
    assert isinstance(optimizer, MuonWithAdamW)
    muon_ids = {id(p) for g in optimizer.muon.param_groups for p in g["params"]}
    adamw_ids = {id(p) for g in optimizer.adamw.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert muon_ids == {id(named[n]) for n in expected}
    assert muon_ids | adamw_ids == {id(p) for p in model.parameters()}
    assert not muon_ids & adamw_ids
    # Muon follows the schedule scaled to its own peak (muon_lr / phase1.peak_lr)
    set_learning_rate(optimizer, training.phase1.peak_lr / 4)
    assert optimizer.muon.param_groups[0]["lr"] == pytest.approx(training.optimizer.muon_lr / 4)
    assert optimizer.adamw.param_groups[0]["lr"] == training.phase1.peak_lr / 4


@pytest.fixture(scope="module")
def muon_reference(smoke_shards, tmp_path_factory):
    """One uninterrupted smoke run with Muon."""
    tmp = tmp_path_factory.mktemp("muon")
    config = muon_smoke(tmp)
    run_dir = tmp / "reference"
    assert run_inprocess(run_dir, smoke_shards, config=config) == 0
    return config, run_dir


def test_muon_half_then_resume_is_bit_identical(muon_reference, smoke_shards, tmp_path) -> None:
    config, reference = muon_reference
    _, payload = load_run_checkpoint(reference)
    # both optimizers' states are checkpointed: Muon's momentum for its 12 matrices, AdamW's
    # moments for the rest
    assert set(payload["optimizer"]) == {"muon", "adamw"}
    assert len(payload["optimizer"]["muon"]["state"]) == 12
    assert all("momentum_buffer" in s for s in payload["optimizer"]["muon"]["state"].values())
    assert all("exp_avg_sq" in s for s in payload["optimizer"]["adamw"]["state"].values())
    run_dir = tmp_path / "halves"
    assert run_inprocess(run_dir, smoke_shards, config=config, max_steps=TOTAL // 2 - 1) == 0
    assert run_inprocess(run_dir, smoke_shards, config=config) == 0  # resumes 7 -> 16
    assert state_hash(run_dir) == state_hash(reference)


def test_muon_trains_other_weights_than_adamw(muon_reference, smoke_shards, tmp_path):
    _, reference = muon_reference
    assert run_inprocess(tmp_path / "adamw", smoke_shards) == 0
    muon = load_run_checkpoint(reference)[1]["model"]
    adamw = load_run_checkpoint(tmp_path / "adamw")[1]["model"]
    # a block matrix moves differently; so, through the different forward passes, does the
    # AdamW-trained decoder
    assert not torch.equal(muon["blocks.0.ff.0.weight"], adamw["blocks.0.ff.0.weight"])
    assert torch.isfinite(muon["decoder.2.weight"]).all()


# ----------------------------------------------------------------- last-checkpoint average --
def test_export_writes_the_exact_mean_of_the_last_checkpoints(smoke_shards, tmp_path) -> None:
    config = _smoke_with(tmp_path, "avg", "  average: last_checkpoints\n  average_last: 3\n")
    run_dir = tmp_path / "run"
    assert run_inprocess(run_dir, smoke_shards, config=config) == 0
    # checkpoints every 4 steps, the newest 3 kept: steps 8, 12, 16
    payloads = [load_run_checkpoint(run_dir, step)[1] for step in (8, 12, 16)]
    expected = {}
    for name in payloads[0]["model"]:
        total = torch.zeros_like(payloads[0]["model"][name], dtype=torch.float32)
        for payload in payloads:  # oldest first
            total += payload["model"][name]
        expected[name] = total / 3
    assert trainer_cli(["export", str(run_dir), "--out", str(tmp_path / "w")]) == 0
    exported = load_weights(tmp_path / "w").state_dict()
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(exported[name], tensor), name
    # the mean is of the raw weights, not of the EMA copies
    assert not torch.equal(exported["decoder.2.weight"], payloads[-1]["ema"]["decoder.2.weight"])
    # a step with fewer than average_last checkpoints up to it is refused, not averaged
    assert trainer_cli(["export", str(run_dir), "--out", str(tmp_path / "w8"),
                        "--step", "8"]) == 2
    assert not (tmp_path / "w8").exists()


def test_mean_weights_refuses_checkpoints_of_different_runs() -> None:
    one = {"training_hash": "a", "model": {"w": torch.ones(2)}}
    other = {"training_hash": "b", "model": {"w": torch.zeros(2)}}
    with pytest.raises(Exception, match="different configurations"):
        mean_weights([one, other])
    assert torch.equal(mean_weights([one, one])["w"], torch.ones(2))
