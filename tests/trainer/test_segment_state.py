"""scripts/segment.py's save and record: the committed state of a long run keeps its segment
scores across saves, a score is recorded only for a step the saved run has reached, and
studies/plot_run_curve.py draws the curve from that state."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from studies import plot_run_curve

from .conftest import ROOT, run_inprocess


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


segment = _load("segment", ROOT / "scripts" / "segment.py")


def _reference(tmp_path: Path, step: int, bench_auc: float) -> Path:
    path = tmp_path / f"reference_{step}.json"
    path.write_text(json.dumps({
        "variant": f"smoke_step{step}", "val_auc": 0.6, "val_accuracy": 0.55, "val_loss": 0.68,
        "bench_auc": bench_auc, "bench_per_dataset": {"wdbc": bench_auc}, "cpu": "test CPU",
        "date": "2026-11-22", "weights": f"runs/smoke/weights_step{step}"}))
    return path


def test_scores_survive_saves_and_name_their_step(smoke_shards, tmp_path) -> None:
    run, saved = tmp_path / "run", tmp_path / "saved"
    assert run_inprocess(run, smoke_shards, until_step=8) == 0
    assert segment.save(run, saved) == 8
    segment.record(saved, _reference(tmp_path, 8, 0.70))

    assert run_inprocess(run, smoke_shards, until_step=12) == 0
    assert segment.save(run, saved) == 12
    segment.record(saved, _reference(tmp_path, 12, 0.75))
    segment.record(saved, _reference(tmp_path, 8, 0.71))  # a re-score replaces its step's line

    lines = [json.loads(text) for text in (saved / "scores.jsonl").read_text().splitlines()]
    assert [(line["step"], line["bench_auc"]) for line in lines] == [(8, 0.71), (12, 0.75)]
    # the minutes are the logged throughput's: later steps add time, never remove it
    metrics = saved / "metrics.jsonl"
    assert 0 < segment.training_minutes(metrics, 8) < segment.training_minutes(metrics, 12)
    index = json.loads((saved / "checkpoints" / "index.json").read_text())
    assert [entry["step"] for entry in index["checkpoints"]] == [12]

    with pytest.raises(SystemExit, match="not a step <= 12"):
        segment.record(saved, _reference(tmp_path, 16, 0.8))
    assert len((saved / "scores.jsonl").read_text().splitlines()) == 2


def test_the_curve_reads_the_saved_run(smoke_shards, tmp_path, capsys) -> None:
    run, saved = tmp_path / "run", tmp_path / "saved"
    assert run_inprocess(run, smoke_shards, until_step=8) == 0
    segment.save(run, saved)
    # a resumed segment logs step 8 again after a crash: the curve keeps its last record
    metrics = saved / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    last = [r for r in records if r.get("kind") == "train"][-1]
    metrics.write_text(metrics.read_text() + json.dumps({**last, "loss": 9.0}) + "\n")
    steps, losses, _ = plot_run_curve.train_losses(plot_run_curve.read_jsonl(metrics))
    assert steps == sorted(set(steps)) and steps[-1] == last["step"] and losses[-1] == 9.0

    with pytest.raises(SystemExit, match=r"scores\.jsonl does not exist"):
        plot_run_curve.main([str(saved), "--out", str(tmp_path / "curve.png")])
    segment.record(saved, _reference(tmp_path, 8, 0.70))
    reference = _reference(tmp_path, 0, 0.65)
    out = tmp_path / "curve.png"
    assert plot_run_curve.main([str(saved), "--reference", f"v0={reference}",
                                "--out", str(out)]) == 0
    assert "| 8 |" in capsys.readouterr().out
    assert out.read_bytes().startswith(b"\x89PNG")
