"""What the trainer's commands say when they cannot do their job: one line, exit status 2, and
nothing half-written; and what ``trainer/main.py`` does with no arguments at all."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from prior_gen.cli import main as prior_gen_main
from puicl_common.run_files import output_inside
from trainer import checkpoint
from trainer.checkpoint import CheckpointStore, checkpoint_name
from trainer.cli import main as trainer_cli
from trainer.main import build_parser
from trainer.main import main as train_main

from .conftest import PYTHON, ROOT, SMOKE, run_inprocess


@pytest.fixture(scope="module")
def short_run(smoke_shards, tmp_path_factory) -> Path:
    """Four steps of the smoke run: one checkpoint (step 4) and its metrics."""
    run_dir = tmp_path_factory.mktemp("runs") / "short"
    assert run_inprocess(run_dir, smoke_shards, max_steps=4) == 0
    return run_dir


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trainer {command}: error: "), err
    return lines[0]


def test_export_to_an_existing_file_or_below_one(short_run, tmp_path, capsys) -> None:
    a_file = tmp_path / "weights"
    a_file.write_text("not a directory")
    assert trainer_cli(["export", str(short_run), "--out", str(a_file)]) == 2
    assert f"--out {a_file} is an existing file" in _one_error_line(capsys, "export")
    assert a_file.read_text() == "not a directory"
    below = a_file / "sub"
    assert trainer_cli(["export", str(short_run), "--out", str(below)]) == 2
    assert f"{a_file} is a file, not a directory" in _one_error_line(capsys, "export")


def test_export_into_a_read_only_place(short_run, capsys, read_only_place) -> None:
    out = read_only_place / "weights"
    assert trainer_cli(["export", str(short_run), "--out", str(out)]) == 2
    assert f"cannot write {out}" in _one_error_line(capsys, "export")


def test_plot_into_a_read_only_place_or_below_a_file(short_run, tmp_path, capsys,
                                                     read_only_place) -> None:
    out = read_only_place / "metrics.png"
    assert trainer_cli(["plot", str(short_run), "--out", str(out)]) == 2
    assert f"cannot write {out}" in _one_error_line(capsys, "plot")
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert trainer_cli(["plot", str(short_run), "--out", str(a_file / "m.png")]) == 2
    assert f"{a_file} is a file, not a directory" in _one_error_line(capsys, "plot")
    # and where it can write, the whole PNG and nothing else
    good = tmp_path / "plots" / "m.png"
    assert trainer_cli(["plot", str(short_run), "--out", str(good)]) == 0
    assert good.read_bytes()[:4] == b"\x89PNG" and os.listdir(good.parent) == ["m.png"]


def test_export_without_an_index_rebuilds_it(short_run, tmp_path, capsys) -> None:
    run_dir = shutil.copytree(short_run, tmp_path / "run")
    (run_dir / "checkpoints" / "index.json").unlink()
    assert trainer_cli(["export", str(run_dir), "--out", str(tmp_path / "w")]) == 0
    captured = capsys.readouterr()
    assert checkpoint_name(4) in captured.out and (tmp_path / "w" / "model.safetensors").exists()
    assert captured.err.strip() == (
        f"trainer export: warning: {run_dir / 'checkpoints' / 'index.json'} was missing: "
        "rebuilt it from the step files of steps [4]"
    )


def test_export_with_a_damaged_index_gives_advice_export_can_follow(
    short_run, tmp_path, capsys
) -> None:
    run_dir = shutil.copytree(short_run, tmp_path / "run")
    index = run_dir / "checkpoints" / "index.json"
    index.write_text("{damaged")
    assert trainer_cli(["export", str(run_dir), "--out", str(tmp_path / "w")]) == 2
    line = _one_error_line(capsys, "export")
    assert "--resume" not in line and "delete it" in line
    index.unlink()
    assert trainer_cli(["export", str(run_dir), "--out", str(tmp_path / "w")]) == 0


@pytest.mark.parametrize("where", ["file", "below a file"])
def test_run_dir_that_is_a_file(smoke_shards, tmp_path, capsys, where) -> None:
    a_file = tmp_path / "run"
    a_file.write_text("")
    run_dir = a_file if where == "file" else a_file / "run"
    argv = ["--config", str(SMOKE), "--shards", str(smoke_shards), "--run-dir", str(run_dir)]
    assert train_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trainer/main.py: error: --run-dir")


@pytest.mark.parametrize("failing", ["checkpoint", "index"])
def test_full_disk_at_a_checkpoint_keeps_the_run(
    smoke_shards, tmp_path, capsys, monkeypatch, failing
) -> None:
    """ENOSPC half-way through a write: exit 2 with one line, the earlier checkpoint and its
    index untouched, nothing partial left, and the same command continues afterwards."""
    run_dir = tmp_path / "run"
    assert run_inprocess(run_dir, smoke_shards, max_steps=4) == 0
    directory = run_dir / "checkpoints"
    index_before = (directory / "index.json").read_bytes()
    target = checkpoint_name(8) if failing == "checkpoint" else "index.json"
    real_write = checkpoint.write_bytes_inside

    def disk_full_at_target(path, data: bytes, root) -> None:
        if Path(path).name != target:
            return real_write(path, data, root)
        with output_inside(path, root) as temporary, open(temporary, "wb") as stream:
            stream.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary))

    monkeypatch.setattr(checkpoint, "write_bytes_inside", disk_full_at_target)
    capsys.readouterr()
    assert run_inprocess(run_dir, smoke_shards, max_steps=4) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert "Traceback" not in err and len(errors) == 1, err
    assert "checkpoint of step 8" in errors[0] and os.strerror(errno.ENOSPC) in errors[0]
    assert (directory / "index.json").read_bytes() == index_before
    assert sorted(os.listdir(directory)) == ["index.json", checkpoint_name(4)]

    monkeypatch.undo()
    assert run_inprocess(run_dir, smoke_shards, max_steps=4) == 0
    assert [e["step"] for e in CheckpointStore(directory).entries()] == [4, 8]


def test_help_shows_the_default_config() -> None:
    result = subprocess.run(
        [PYTHON, str(ROOT / "trainer" / "main.py"), "--help"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert "default: configs/paper.yaml" in " ".join(result.stdout.split())
    args = build_parser().parse_args([])
    assert (args.config, args.shards) == (Path("configs/paper.yaml"), Path("shards"))


def test_no_arguments_without_the_config_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert train_main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "trainer/main.py: error: config configs/paper.yaml (the default) not found: run from "
        "the repository root or pass --config PATH, e.g. --config configs/smoke.yaml"
    ]


def test_the_two_commands_of_the_readme(tmp_path, capsys, monkeypatch) -> None:
    """``prior-gen --stages 1-100 --out shards/`` then ``trainer/main.py`` with no arguments, in
    a checkout whose configs/paper.yaml is the smoke config (3 stages, so --stages 1-3): the
    trainer names, one line each, the commands for the tail and the validation split."""
    (tmp_path / "configs").mkdir()
    shutil.copy(SMOKE, tmp_path / "configs" / "paper.yaml")
    monkeypatch.chdir(tmp_path)
    assert prior_gen_main(["--stages", "1-3", "--out", "shards/", "--workers", "1"]) == 0
    capsys.readouterr()

    assert train_main([]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, err
    tail = "prior-gen --config configs/paper.yaml --stages tail --steps 0-3 --out shards"
    val = ("prior-gen --config configs/paper.yaml --split val --stages 1,3,tail --steps 0-1 "
           "--out shards")
    assert errors[0].endswith(f"generate them with: {tail}") and "stage tail" in errors[0]
    assert errors[1].endswith(f"generate them with: {val}") and "'val' split" in errors[1]
    assert not (tmp_path / "runs").exists()

    for command in (tail, val):  # the printed commands make what was missing
        assert prior_gen_main([*shlex.split(command)[1:], "--workers", "1"]) == 0
    assert train_main(["--max-steps", "2", "--threads", "1"]) == 0
    index = json.loads((tmp_path / "runs" / "paper" / "checkpoints" / "index.json").read_text())
    assert [e["step"] for e in index["checkpoints"]] == [2]


@pytest.mark.parametrize("planted", ["checkpoints/index.json", "checkpoints/step_00000012.pt",
                                     "metrics.jsonl", "checkpoints"])
def test_a_link_planted_in_the_run_directory_is_refused_and_its_target_kept(
        short_run, smoke_shards, tmp_path, capsys, planted) -> None:
    """A copied or downloaded run may hold a link out of it: the trainer would write through
    it. It refuses to start, naming the link, and the link's target keeps its bytes."""
    run_dir = tmp_path / "run"
    shutil.copytree(short_run, run_dir, symlinks=True)
    victim = tmp_path / "outside.txt"
    victim.write_bytes(b"precious")
    link = run_dir / planted
    if link.is_dir():
        shutil.rmtree(link)
    else:
        link.unlink(missing_ok=True)
    link.symlink_to(victim if planted != "checkpoints" else tmp_path)
    argv = ["--config", str(SMOKE), "--shards", str(smoke_shards), "--run-dir", str(run_dir),
            "--max-steps", "12", "--threads", "1"]
    assert train_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"holds a symbolic link, {link} -> " in err[0]
    assert victim.read_bytes() == b"precious"


def _rewrite_checkpoint(run_dir: Path, change) -> None:
    """Rewrite the run's newest checkpoint through ``change(payload)`` with its index entry
    updated, so that it passes its checksum as a crafted file would."""
    import hashlib

    import torch

    directory = run_dir / "checkpoints"
    index = json.loads((directory / "index.json").read_text())
    entry = index["checkpoints"][-1]
    path = directory / entry["file"]
    payload = torch.load(path, weights_only=False)  # the test's own file
    change(payload)
    torch.save(payload, path)
    data = path.read_bytes()
    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (directory / "index.json").write_text(json.dumps(index, indent=1) + "\n")


@pytest.mark.parametrize("change, message", [
    (lambda p: p["config"]["model"].update(embed_dim=4096, ff_dim=16384, num_layers=64),
     "does not fit its model config"),
    (lambda p: p["config"]["model"].update(embed_dim=32768, ff_dim=1_000_000),
     "beyond what puicl loads"),
    (lambda p: p.pop("ema"), "holds no model config or EMA weights"),
    (lambda p: p["config"].pop("model"), "holds no model config or EMA weights"),
    (lambda p: p.pop("config"), "holds no 'config'"),
    (lambda p: p.update(config="paper.yaml"), "holds a str as its config"),
    (lambda p: next(iter(p["ema"].values())).view(-1)[:1].fill_(float("nan")),
     "(NaN or infinite)"),
    (lambda p: [tensor.mul_(1e30) for tensor in p["ema"].values()
                if tensor.is_floating_point()],
     "above 10000 in magnitude"),
], ids=["larger-than-its-tensors", "beyond-the-limits", "no-ema", "no-model-config",
        "no-config", "a-string-config", "nan-ema", "huge-ema"])
def test_export_checks_the_stored_config_before_building_a_model(
        short_run, tmp_path, capsys, change, message) -> None:
    """A checkpoint that passes its checksum but whose config claims a model larger than its
    EMA tensors (or that lacks them) is refused in one line; no model of that size is built."""
    run_dir = tmp_path / "run"
    shutil.copytree(short_run, run_dir)
    _rewrite_checkpoint(run_dir, change)
    out = tmp_path / "weights"
    assert trainer_cli(["export", str(run_dir), "--out", str(out)]) == 2
    assert message in _one_error_line(capsys, "export")
    assert not out.exists()


@pytest.mark.parametrize("change", [
    lambda p: p.pop("optimizer"),
    lambda p: p.update(counters={"no such counter": 1}),
    lambda p: p["model"].pop(next(iter(p["model"]))),
    lambda p: p.update(hardware="cpu"),
    lambda p: p.update(deterministic="yes"),
], ids=["no-optimizer", "bad-counters", "a-weight-missing", "hardware-a-string",
        "deterministic-a-string"])
def test_resuming_an_inconsistent_checkpoint_is_one_line(short_run, smoke_shards, tmp_path,
                                                         capsys, change) -> None:
    """A checkpoint that passes its checksum (written whole) but lacks what resuming reads is
    refused in one line, exit 2, not a KeyError or RuntimeError traceback."""
    run_dir = tmp_path / "run"
    shutil.copytree(short_run, run_dir)
    _rewrite_checkpoint(run_dir, change)
    argv = ["--config", str(SMOKE), "--shards", str(smoke_shards), "--run-dir", str(run_dir),
            "--max-steps", "6", "--threads", "1"]
    assert train_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "passes its checksum but is not a checkpoint this trainer can " \
                             "resume" in err[0], err


def test_more_threads_than_any_machine_has_is_refused_before_anything_runs(capsys) -> None:
    # OpenMP starts every thread asked for: 10⁵ of them end the process with a signal
    with pytest.raises(SystemExit) as stop:
        train_main(["--threads", "100000"])
    assert stop.value.code == 2
    assert "--threads must be at most 1024, got 100000" in capsys.readouterr().err
