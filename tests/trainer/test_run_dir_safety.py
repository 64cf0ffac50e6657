"""Inside a run directory, and the shard directory it reads, only regular files and folders are
written and read: a link, a device or a FIFO there (planted before a command or while it runs)
is refused in one line naming it, its target keeps its bytes, and nothing hangs."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from trainer import hooks
from trainer.checkpoint import checkpoint_name
from trainer.cli import main as trainer_cli
from trainer.main import main as train_main
from trainer.plotting import plot_run

from .conftest import SMOKE, run_inprocess

VICTIM = b"precious bytes outside the run"


@pytest.fixture(scope="module")
def four_steps(smoke_shards, tmp_path_factory) -> Path:
    """Four steps of the smoke run: one checkpoint (step 4) and its metrics."""
    run_dir = tmp_path_factory.mktemp("runs") / "four"
    assert run_inprocess(run_dir, smoke_shards, max_steps=4) == 0
    return run_dir


@pytest.fixture
def run(four_steps, tmp_path) -> Path:
    return Path(shutil.copytree(four_steps, tmp_path / "run"))


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "outside.bin"
    path.write_bytes(VICTIM)
    return path


def _plant(path: Path, kind: str, target: Path) -> None:
    """Put a ``kind`` entry at ``path`` (whatever stood there goes)."""
    path.unlink(missing_ok=True)
    if kind == "link":
        path.symlink_to(target)
    elif kind == "dangling link":
        path.symlink_to(target.with_name("created-through-a-link"))
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # a character device: the numbers of /dev/null
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))


WORDS = {"link": "a symbolic link", "dangling link": "a symbolic link", "fifo": "a FIFO",
         "device": "a character device"}


def _one_error(capsys, prefix: str = "") -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(prefix), err
    return errors[0]


def _outside_untouched(victim: Path) -> None:
    assert victim.read_bytes() == VICTIM
    assert not victim.with_name("created-through-a-link").exists()


@pytest.mark.parametrize("kind", ["link", "dangling link", "fifo", "device"])
def test_plot_writes_no_entry_of_the_run_but_a_regular_file(run, victim, capsys, kind) -> None:
    _plant(run / "metrics.png", kind, victim)
    assert trainer_cli(["plot", str(run)]) == 2
    line = _one_error(capsys, "trainer plot: error: ")
    assert f"{WORDS[kind]}, {run / 'metrics.png'}" in line
    _outside_untouched(victim)
    # planted after the command's start-up check: the write itself refuses it
    with pytest.raises((OSError, ValueError), match=WORDS[kind]):
        plot_run(run)
    _outside_untouched(victim)


def test_plot_to_an_out_inside_the_run_follows_no_link(run, victim, capsys) -> None:
    (run / "figures").mkdir()
    _plant(run / "figures" / "curves.png", "link", victim)
    with pytest.raises((OSError, ValueError), match="a symbolic link"):
        plot_run(run, run / "figures" / "curves.png")
    _outside_untouched(victim)


@pytest.mark.parametrize("kind", ["link", "dangling link", "fifo", "device"])
def test_export_rebuilds_no_index_through_an_entry_that_is_not_a_file(run, victim, tmp_path,
                                                                      capsys, kind) -> None:
    index = run / "checkpoints" / "index.json"
    _plant(index, kind, victim)
    out = tmp_path / "weights"
    assert trainer_cli(["export", str(run), "--out", str(out)]) == 2
    assert f"{WORDS[kind]}, {index}" in _one_error(capsys, "trainer export: error: ")
    _outside_untouched(victim)
    assert not out.exists()


@pytest.mark.parametrize("kind", ["link", "dangling link", "fifo", "device"])
def test_an_entry_planted_at_the_next_checkpoint_while_training_gets_nothing(
        run, victim, smoke_shards, capsys, kind) -> None:
    """A link, FIFO or device put at ``step_00000008.pt`` after the start-up check (here:
    while step 6 trains) is refused at the checkpoint's write: exit 2 with one line naming
    it, its target untouched, and the index still lists the checkpoints that exist."""
    directory = run / "checkpoints"
    index_before = (directory / "index.json").read_bytes()
    planted = directory / checkpoint_name(8)

    class Planter(hooks.StepHook):
        def step_begins(self) -> None:
            _plant(planted, kind, victim)

    def factory(step: int, rank: int) -> hooks.StepHook:
        return Planter() if step == 5 else hooks.NO_HOOK

    with hooks.installed(factory):
        assert run_inprocess(run, smoke_shards, max_steps=4) == 2
    assert f"{WORDS[kind]}, {planted}" in _one_error(capsys, "error: ")
    _outside_untouched(victim)
    assert (directory / "index.json").read_bytes() == index_before
    assert os.path.lexists(planted)  # left for the user to see, not replaced


@pytest.mark.parametrize("where", ["metrics.jsonl", "checkpoints/index.json",
                                   "checkpoints/step_00000004.pt"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_fifos_and_devices_in_a_run_are_refused_by_every_command(
        run, victim, smoke_shards, tmp_path, capsys, where, kind) -> None:
    """``cp -r`` keeps FIFOs and device nodes: the trainer, ``trainer export`` and ``trainer
    plot`` each refuse the run in one line naming the entry, without opening it (a FIFO would
    hang them)."""
    entry = run / where
    _plant(entry, kind, victim)
    argv = ["--config", str(SMOKE), "--shards", str(smoke_shards), "--run-dir", str(run),
            "--max-steps", "4", "--threads", "1"]
    assert train_main(argv) == 2
    assert f"{WORDS[kind]}, {entry}" in _one_error(capsys, "trainer/main.py: error: ")
    out = tmp_path / "weights"
    assert trainer_cli(["export", str(run), "--out", str(out)]) == 2
    assert f"{WORDS[kind]}, {entry}" in _one_error(capsys, "trainer export: error: ")
    assert not out.exists()
    assert trainer_cli(["plot", str(run), "--out", str(tmp_path / "curves.png")]) == 2
    assert f"{WORDS[kind]}, {entry}" in _one_error(capsys, "trainer plot: error: ")
    assert not (tmp_path / "curves.png").exists()


def test_a_fifo_for_the_shard_manifest_is_refused_by_the_trainer(run, smoke_shards, tmp_path,
                                                                 capsys) -> None:
    shards = Path(shutil.copytree(smoke_shards, tmp_path / "shards"))
    _plant(shards / "manifest.json", "fifo", shards)
    argv = ["--config", str(SMOKE), "--shards", str(shards), "--run-dir", str(run),
            "--max-steps", "4", "--threads", "1"]
    assert train_main(argv) == 2
    assert f"a FIFO, {shards / 'manifest.json'}" in _one_error(capsys, "error: ")


def test_an_out_the_user_names_outside_the_run_is_written_as_given(run, capsys) -> None:
    """The rules hold inside the run directory only: ``--out /dev/null`` stays allowed."""
    assert trainer_cli(["plot", str(run), "--out", os.devnull]) == 0
    assert capsys.readouterr().err == ""
    assert not (run / "metrics.png").exists()
