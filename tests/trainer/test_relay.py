"""The relay's dry run on a CPU, as a user runs it: the smoke config in two segments of
``scripts/relay_gpu.sh`` / ``python -m relay segment`` ends bit for bit where one uninterrupted
run ends, and the second segment's replay says IDENTICAL. A committed state or record that was
changed gives a one-line error or a DIFFERENT that stops the run, never a silent continue; a
DIFFERENT on another machine kind is recorded with its reason and the run goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from relay import folder as run_folder
from relay import report, state_pack
from relay.digest import state_digest
from trainer.export import load_run_checkpoint

from .conftest import ROOT, SMOKE, run_inprocess

# small and quick: the smoke model's own validation stages as the fixed validation split,
# no development suite (its tables are not in every checkout), one prior-gen worker
OPTIONS = ["--device", "cpu", "--budget", "0", "--workers", "1", "--dev-repeats", "0",
           "--val-config", str(SMOKE)]


def relay(*args: str, work: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "relay", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def segment(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return relay("segment", str(folder), str(out), *OPTIONS, "--work", str(out.parent / "work"),
                 *extra, work=out.parent)


def record(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "relay.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def first_segment(tmp_path_factory) -> Path:
    """A smoke run folder after its first segment (steps 0..7, the state of step 5 committed),
    trained by the shell script a GPU machine runs, in its CPU mode."""
    base = tmp_path_factory.mktemp("relay")
    folder = base / "smoke-run"
    assert relay("init", str(SMOKE), str(folder), "--replay-steps", "3", work=base) \
        .returncode == 0
    env = {**os.environ, "DEVICE": "cpu", "BUDGET": "0", "PYTHON": sys.executable,
           "OMP_NUM_THREADS": "1",
           "RELAY_ARGS": " ".join([*OPTIONS[4:], "--until-step", "8", "--first-chunk-steps",
                                   "2", "--work", str(base / "work")])}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "relay_gpu.sh"), str(folder),
                           str(base / "out")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "segment 1 done" in (base / "out" / "log.txt").read_text()
    taken = relay("take", str(base / "out" / "smoke-run"), str(folder), work=base)
    assert taken.returncode == 0, taken.stderr
    return folder


def fresh_copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / folder.name))


@pytest.mark.slow
def test_two_segments_end_where_one_run_ends_and_the_replay_is_identical(
        first_segment, smoke_shards, tmp_path) -> None:
    folder = fresh_copy(first_segment, tmp_path)
    first = record(folder)[0]
    assert first["replay"] == {"verdict": "none"}
    assert (first["committed"]["step"], first["end"]["step"]) == (5, 8)
    assert first["trained"]["first_step"] == 0 and first["trained"]["last_step"] == 7
    assert len(first["pieces"]) >= 3  # chunks of 2 steps, then the 3 steps after step 5

    done = segment(folder, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert relay("take", str(tmp_path / "out" / "smoke-run"), str(folder),
                 work=tmp_path).returncode == 0
    second = record(folder)[1]
    assert second["replay"]["verdict"] == "IDENTICAL"
    assert (second["replay"]["from_step"], second["replay"]["to_step"]) == (5, 8)
    assert (second["committed"]["step"], second["end"]["step"]) == (13, 16)
    # the second segment scored the state it started from, beside its training
    assert (first["scored_step"], second["scored_step"]) == (None, 5)
    (scored,) = run_folder.read_scores(folder / "scores.jsonl")
    assert (scored["step"], scored["segment"]) == (5, 1) and scored["val_auc"] is not None
    # the last committed state is scored on any machine, and a score can be checked there
    newest = report.score_committed(folder, tmp_path / "score", 0, True, SMOKE)
    assert [s["step"] for s in run_folder.read_scores(folder / "scores.jsonl")] == [5, 13]
    assert newest["val_auc"] is not None

    whole = tmp_path / "whole"
    assert run_inprocess(whole, smoke_shards) == 0
    _, payload = load_run_checkpoint(whole, 16)
    assert state_digest(payload) == second["end"]["digest"]  # every part, bit for bit
    # the committed state is step 13 of that same run, and what the record says it is
    manifest, data = state_pack.unpack(folder / "state")
    assert manifest["step"] == 13
    assert state_pack.sha256_hex(data) == second["committed"]["checkpoint_sha256"]
    shown = relay("show", str(folder), work=tmp_path)
    assert "at step 16 of 16" in shown.stdout and "| IDENTICAL |" in shown.stdout
    finished = segment(folder, tmp_path / "out3")
    assert finished.returncode == 0 and "the run is complete" in finished.stdout
    assert not (tmp_path / "out3" / "smoke-run").exists()


@pytest.mark.slow
def test_a_damaged_committed_state_is_one_line_and_nothing_else(first_segment,
                                                                tmp_path) -> None:
    folder = fresh_copy(first_segment, tmp_path)
    part = folder / "state" / "part-00.xz"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x10
    part.write_bytes(bytes(data))
    done = segment(folder, tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "is damaged" in done.stderr
    assert not (tmp_path / "out" / "smoke-run").exists()


@pytest.mark.slow
def test_a_state_changed_with_its_checksums_redone_is_refused(first_segment,
                                                              tmp_path) -> None:
    """Someone changes a weight and writes every checksum anew: the tensors' digest that the
    record holds still catches it."""
    folder = fresh_copy(first_segment, tmp_path)
    _, data = state_pack.unpack(folder / "state")
    run = tmp_path / "run" / "checkpoints"
    run.mkdir(parents=True)
    (run / "step_00000005.pt").write_bytes(data)
    payload = torch.load(run / "step_00000005.pt", weights_only=True)
    name = next(iter(payload["ema"]))
    payload["ema"][name].view(-1)[0] += 1e-3
    torch.save(payload, run / "step_00000005.pt")
    shutil.rmtree(folder / "state")
    manifest = state_pack.pack(run / "step_00000005.pt", folder / "state", 5)
    lines = record(folder)
    lines[0]["committed"]["checkpoint_sha256"] = manifest["checkpoint"]["sha256"]
    (folder / "relay.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = segment(folder, tmp_path / "out")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "not the state segment 1 recorded" in done.stderr
    assert done.stderr.strip().count("\n") == 0


@pytest.mark.slow
def test_a_changed_recorded_digest_is_different_and_stops_the_run(first_segment,
                                                                  tmp_path) -> None:
    folder = fresh_copy(first_segment, tmp_path)
    lines = record(folder)
    lines[0]["end"]["digest"]["ema"] = "0" * 64
    lines[0]["end"]["digest"]["state"] = "0" * 64
    (folder / "relay.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    state_before = (folder / "state" / "state.json").read_text()

    done = segment(folder, tmp_path / "out")
    assert done.returncode == 3, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]  # after the trainer's lines of the replay
    assert last.startswith("relay: stopped:") and "DIFFERENT (unexplained" in last
    returned = tmp_path / "out" / "smoke-run"
    assert not (returned / "state").exists()  # nothing to commit but the record's line
    line = record(returned)[-1]
    assert line["replay"]["verdict"] == "DIFFERENT" and not line["continued"]
    assert line["replay"]["reason"].startswith("unexplained")
    assert line["replay"]["differing_parts"] == ["ema"]
    assert line["committed"] is None and line["trained"] is None
    # taken back, the record says so and the committed state is the one before
    assert relay("take", str(returned), str(folder), work=tmp_path).returncode == 0
    assert len(record(folder)) == 2
    assert (folder / "state" / "state.json").read_text() == state_before
    assert run_folder.newest_state_line(record(folder))["segment"] == 1


@pytest.mark.slow
def test_a_difference_on_another_machine_kind_is_recorded_and_the_run_goes_on(
        first_segment, tmp_path) -> None:
    folder = fresh_copy(first_segment, tmp_path)
    lines = record(folder)
    lines[0]["machine"]["kind"] = "NVIDIA H100 80GB HBM3"
    lines[0]["end"]["digest"]["state"] = "0" * 64  # as if that machine had other bits
    (folder / "relay.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = segment(folder, tmp_path / "out", "--until-step", "11")
    assert done.returncode == 0, done.stderr[-2000:]
    line = record(tmp_path / "out" / "smoke-run")[-1]
    assert line["replay"]["verdict"] == "DIFFERENT" and line["continued"]
    assert line["replay"]["reason"].startswith("machine kind changed")
    assert line["replay"]["recorded_machine"] == "NVIDIA H100 80GB HBM3"
    assert (line["committed"]["step"], line["end"]["step"]) == (8, 11)


@pytest.mark.slow
def test_take_refuses_a_record_that_is_not_the_committed_one_plus_a_line(
        first_segment, tmp_path) -> None:
    folder = fresh_copy(first_segment, tmp_path)
    returned = fresh_copy(first_segment, tmp_path / "returned")  # no new line
    with pytest.raises(run_folder.FolderError, match="plus one line"):
        run_folder.take(returned, folder)
    lines = record(returned)
    lines.append({**lines[0], "segment": 2})  # a line naming a state it does not hold
    lines[1]["committed"] = {**lines[0]["committed"], "step": 6}
    (returned / "relay.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(run_folder.FolderError, match="committed step 6"):
        run_folder.take(returned, folder)
    assert len(record(folder)) == 1
