"""End-to-end training on the smoke config with the real prior generator, model and reader:
determinism, resume (also after SIGKILL), metrics, export, plot, stop on divergence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from prior_gen.shards import open_shards
from puicl_model import PUICLClassifier
from puicl_model.net.batch import collate_tasks
from trainer.cli import main as trainer_cli
from trainer.config import load_run_config
from trainer.export import ema_model_from_checkpoint, load_run_checkpoint
from trainer.metrics_log import read_metrics
from trainer.sampler import RunPlan
from trainer.schedule import learning_rate

from .conftest import SMOKE, copy_run, run_inprocess, run_subprocess, state_hash

TOTAL = 16  # smoke: 3 stages x 4 steps + 4 tail steps


@pytest.fixture(scope="module")
def reference_run(smoke_shards, tmp_path_factory):
    """One uninterrupted in-process run of the whole smoke plan."""
    run_dir = tmp_path_factory.mktemp("runs") / "reference"
    assert run_inprocess(run_dir, smoke_shards) == 0
    return run_dir


# fields that measure the machine rather than the training
TIMING_FIELDS = ("tasks_per_s", "rss_gb", "peak_rss_gb", "data_wait_share")


def _train_records(run_dir):
    return [
        {k: v for k, v in r.items() if k not in TIMING_FIELDS}
        for r in read_metrics(run_dir / "metrics.jsonl")
        if r["kind"] in ("train", "val")
    ]


def test_reference_run_metrics_and_schedule(reference_run) -> None:
    records = read_metrics(reference_run / "metrics.jsonl")
    train = [r for r in records if r["kind"] == "train"]
    val = [r for r in records if r["kind"] == "val"]
    assert [r["step"] for r in train] == list(range(1, TOTAL + 1))  # log_every: 1
    assert [r["step"] for r in val] == [4, 8, 12, 16]  # validation.every_steps: 4
    config = load_run_config(SMOKE)
    plan = RunPlan.from_curriculum(config.curriculum)
    for record in train:
        assert record["lr"] == learning_rate(record["step"] - 1, plan, config.training)
        assert np.isfinite(record["loss"]) and record["grad_norm"] > 0
        assert 0 < record["rss_gb"] < 100 and 0 < record["peak_rss_gb"] < 100
    peaks = [r["peak_rss_gb"] for r in train]  # one process: its peak never falls
    assert peaks == sorted(peaks)
    assert [(r["phase"], r["stage"]) for r in train[::4]] == [
        (1, 1), (1, 2), (1, 3), (2, "tail")
    ]
    last = val[-1]
    assert last["tasks"] == 3 * 2 * 8  # stages 1, 3, tail x 2 steps x 8 tasks
    assert 0 <= last["auc"] <= 1 and 0 <= last["accuracy"] <= 1
    assert set(last["auc_by_pi"]) == {"0-0.3", "0.3-0.5", "0.5-0.7", "0.7-1"}
    assert set(last["auc_by_stage"]) == {"1", "3", "tail"}
    # keep-last-3 of checkpoints every 4 steps
    index = json.loads((reference_run / "checkpoints" / "index.json").read_text())
    assert [e["step"] for e in index["checkpoints"]] == [8, 12, 16]


def test_two_identical_runs_give_identical_weights(reference_run, smoke_shards, tmp_path):
    assert run_inprocess(tmp_path / "again", smoke_shards) == 0
    assert state_hash(tmp_path / "again") == state_hash(reference_run)


def test_half_then_resume_is_bit_identical(reference_run, smoke_shards, tmp_path) -> None:
    run_dir = tmp_path / "halves"
    assert run_inprocess(run_dir, smoke_shards, max_steps=TOTAL // 2 - 1) == 0  # ends at 7
    assert load_run_checkpoint(run_dir)[1]["step"] == 7
    assert run_inprocess(run_dir, smoke_shards, until_step=TOTAL // 2 + 3) == 0  # 7 -> 11
    assert run_inprocess(run_dir, smoke_shards) == 0  # auto-resume 11 -> 16
    assert state_hash(run_dir) == state_hash(reference_run)
    # the metrics read as one run
    assert _train_records(run_dir) == _train_records(reference_run)
    # a finished run has nothing left to do
    assert run_inprocess(run_dir, smoke_shards) == 0
    assert state_hash(run_dir) == state_hash(reference_run)


@pytest.mark.slow  # a training subprocess killed and resumed
def test_sigkill_mid_run_then_resume_is_bit_identical(reference_run, smoke_shards, tmp_path):
    run_dir = tmp_path / "killed"
    # step index 9 = the 10th step, after the checkpoint of step 8, in the middle of the step
    killed = run_subprocess(run_dir, smoke_shards, faults="kill@9:0")
    assert killed.returncode == -9, killed.stderr
    assert load_run_checkpoint(run_dir)[1]["step"] == 8
    assert not list((run_dir / "checkpoints").glob("*.tmp"))
    resumed = run_subprocess(run_dir, smoke_shards)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr and "step_00000008.pt" in resumed.stderr
    assert state_hash(run_dir) == state_hash(reference_run)
    assert _train_records(run_dir) == _train_records(reference_run)


def test_sigterm_checkpoints_and_stops_then_resumes_identically(
    reference_run, smoke_shards, tmp_path, monkeypatch
) -> None:
    run_dir = tmp_path / "terminated"
    monkeypatch.setenv("PUICL_TRAINER_FAULTS", "sigterm@5:0")
    assert run_inprocess(run_dir, smoke_shards) == 0
    assert load_run_checkpoint(run_dir)[1]["step"] == 6  # finished step index 5, then stopped
    monkeypatch.delenv("PUICL_TRAINER_FAULTS")
    assert run_inprocess(run_dir, smoke_shards) == 0
    assert state_hash(run_dir) == state_hash(reference_run)


def test_explicit_resume_from_an_older_checkpoint(reference_run, smoke_shards, tmp_path):
    run_dir = copy_run(reference_run, tmp_path / "copy")
    older = run_dir / "checkpoints" / "step_00000012.pt"
    assert run_inprocess(run_dir, smoke_shards, resume=older) == 0
    assert state_hash(run_dir) == state_hash(reference_run)


def test_resume_with_another_config_is_refused(reference_run, smoke_shards, tmp_path, capsys):
    run_dir = copy_run(reference_run, tmp_path / "copy")
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        SMOKE.read_text().replace("peak_lr: 1.0e-3", "peak_lr: 2.0e-3")
    )
    assert run_inprocess(run_dir, smoke_shards, config=changed, resume=None) == 2
    err = capsys.readouterr().err
    assert "was trained with a different configuration" in err
    assert "training.phase1.peak_lr: 0.001 in the checkpoint, 0.002 now" in err


def test_stops_after_max_consecutive_skips(smoke_shards, tmp_path, capsys, monkeypatch):
    # smoke: max_consecutive_skips 3; steps 4, 5, 6 (0-based) non-finite
    monkeypatch.setenv("PUICL_TRAINER_FAULTS", "nonfinite_grad@4:0,nonfinite_loss@5:0,"
                       "nonfinite_loss@6:0")
    assert run_inprocess(tmp_path / "diverged", smoke_shards) == 3
    err = capsys.readouterr().err
    assert "3 consecutive steps had a non-finite loss or gradient" in err
    records = read_metrics(tmp_path / "diverged" / "metrics.jsonl")
    assert [r["step"] for r in records if r.get("event") == "skipped"] == [5, 6, 7]
    # the checkpoint of step 4 (before the divergence) is the newest
    assert load_run_checkpoint(tmp_path / "diverged")[1]["step"] == 4


def test_export_then_classifier_round_trip(reference_run, smoke_shards, tmp_path) -> None:
    out = tmp_path / "weights"
    assert trainer_cli(["export", str(reference_run), "--out", str(out)]) == 0
    _, payload = load_run_checkpoint(reference_run)
    ema = ema_model_from_checkpoint(payload)
    task = open_shards(smoke_shards, "val").read_step(3, 1)[0]
    s = np.zeros(task.n_rows, dtype=int)
    s[: task.n_labeled] = 1
    clf = PUICLClassifier(weights=out, device="cpu", random_state=0,
                          numeric="standard").fit(task.x, s)  # the model sees the raw task
    proba = clf.predict_proba(task.x[s == 0])[:, 1]
    with torch.no_grad():
        logits = ema(collate_tasks([task.x], [task.n_labeled]))[0, task.n_labeled :]
    assert np.abs(torch.softmax(logits, -1)[:, 1].numpy() - proba).max() < 1e-5
    # the exported weights are the EMA, not the raw model
    assert not torch.equal(payload["ema"]["decoder.2.weight"], payload["model"]["decoder.2.weight"])
    assert trainer_cli(["export", str(reference_run), "--out", str(out), "--step", "3"]) == 2


def test_plot(reference_run, tmp_path) -> None:
    out = tmp_path / "curves.png"
    assert trainer_cli(["plot", str(reference_run), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert trainer_cli(["plot", str(tmp_path / "nothing")]) == 2


def _with_attention(tmp_path, backend: str):
    path = tmp_path / f"smoke-{backend}.yaml"
    path.write_text(SMOKE.read_text().replace(
        "  activation_checkpointing: false\n",
        f"  activation_checkpointing: false\n  attention: {backend}\n",
    ))
    return path


def test_a_run_records_its_attention_backend_and_keeps_it(smoke_shards, tmp_path, monkeypatch):
    import trainer.attention

    run_dir = tmp_path / "run"
    packed = _with_attention(tmp_path, "packed")
    assert run_inprocess(run_dir, smoke_shards, config=packed, until_step=8) == 0
    assert load_run_checkpoint(run_dir)[1]["attention"] == "packed"
    # resumed with "auto": the recorded backend is taken, nothing is resolved (or timed) again
    monkeypatch.setattr(trainer.attention, "resolve_backend",
                        lambda *args, **kwargs: pytest.fail("resolved again on resume"))
    assert run_inprocess(run_dir, smoke_shards, config=_with_attention(tmp_path, "auto")) == 0
    starts = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("event") == "start"]
    assert [r["attention"] for r in starts] == ["packed", "packed"]
    assert load_run_checkpoint(run_dir)[1]["attention"] == "packed"


def test_resume_with_another_attention_backend_is_refused(smoke_shards, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert run_inprocess(run_dir, smoke_shards, config=_with_attention(tmp_path, "packed"),
                         until_step=4) == 0
    bucketed = _with_attention(tmp_path, "bucketed")
    assert run_inprocess(run_dir, smoke_shards, config=bucketed) == 2
    err = capsys.readouterr().err
    assert "training.attention: this run trains with the attention backend 'packed'" in err
