"""``puicl_common.run_files``: inside a run or shard directory a write never follows a link and
never goes into a device or FIFO, a read never waits on a FIFO; and
``same_file.refuse_output_among_inputs``: an output that is one of the command's inputs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from puicl_common.output_paths import OutputPathError
from puicl_common.run_files import (
    UnsafeEntryError,
    check_run_directory,
    open_append_inside,
    output_inside,
    read_bytes_inside,
    write_bytes_inside,
)
from puicl_common.same_file import refuse_output_among_inputs


@pytest.fixture
def run(tmp_path) -> Path:
    directory = tmp_path / "run"
    (directory / "checkpoints").mkdir(parents=True)
    return directory


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(b"precious")
    return path


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))


def test_a_regular_file_is_replaced_with_its_mode_kept(run) -> None:
    path = run / "checkpoints" / "index.json"
    write_bytes_inside(path, b"one", run)
    os.chmod(path, 0o640)
    write_bytes_inside(path, b"two", run)
    assert path.read_bytes() == b"two" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(path.parent)) == ["index.json"]


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "device", "linked folder"])
def test_a_write_refuses_what_is_not_a_regular_file(run, victim, kind) -> None:
    path = run / "checkpoints" / "step_00000008.pt"
    if kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(victim.with_name("made"))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        _device(path)
    else:  # the folder above is a link out of the run
        (run / "checkpoints").rmdir()
        (run / "checkpoints").symlink_to(victim.parent)
    with pytest.raises(UnsafeEntryError) as caught:
        write_bytes_inside(path, b"checkpoint", run)
    assert len(str(caught.value).splitlines()) == 1
    assert victim.read_bytes() == b"precious" and not victim.with_name("made").exists()
    assert not (victim.parent / path.name).exists()


def test_an_entry_planted_while_the_content_is_written_is_refused(run, victim) -> None:
    path = run / "metrics.png"
    with pytest.raises(UnsafeEntryError, match="a symbolic link"), \
            output_inside(path, run) as temporary:
        temporary.write_bytes(b"figure")
        path.symlink_to(victim)
    assert victim.read_bytes() == b"precious"
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "metrics.png"]  # no temporary


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_appending_and_reading_refuse_without_waiting(run, victim, kind) -> None:
    path = run / "metrics.jsonl"
    if kind == "fifo":
        os.mkfifo(path)  # opened blocking, either call would wait for the other end for ever
    else:
        path.symlink_to(victim)
    with pytest.raises(UnsafeEntryError, match="a FIFO" if kind == "fifo" else "link"):
        open_append_inside(path, run)
    with pytest.raises(UnsafeEntryError):
        read_bytes_inside(path)
    assert victim.read_bytes() == b"precious"


def test_the_start_up_check_names_the_first_entry_that_is_not_a_file(run, victim) -> None:
    check_run_directory(run, "--run-dir")
    os.mkfifo(run / "checkpoints" / "index.json")
    with pytest.raises(UnsafeEntryError, match=r"--run-dir .* holds a FIFO, .*index\.json"):
        check_run_directory(run, "--run-dir")


def test_an_output_that_is_an_input_is_refused(tmp_path) -> None:
    model = tmp_path / "a" / "model.safetensors"
    model.parent.mkdir()
    model.write_bytes(b"weights")
    (tmp_path / "hard").hardlink_to(model)
    (tmp_path / "soft").symlink_to(model.parent)
    for output in (model, tmp_path / "a" / "." / "model.safetensors", tmp_path / "hard",
                   tmp_path / "soft" / "model.safetensors"):
        with pytest.raises(OutputPathError, match="which this command reads"):
            refuse_output_among_inputs({"--out": output}, {"A": model})
    missing = tmp_path / "b" / "config.json"
    with pytest.raises(OutputPathError):
        refuse_output_among_inputs({"--out": tmp_path / "b" / ".." / "b" / "config.json"},
                                   {"A": missing})
    refuse_output_among_inputs({"--out": tmp_path / "c" / "model.safetensors"},
                               {"A": model, "B": missing})


def test_an_output_spelled_through_a_missing_folder_is_the_input_it_reaches(
        tmp_path, monkeypatch) -> None:
    from puicl_common.output_paths import check_output_path
    from puicl_common.same_file import same_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("a\n1\n")
    # a writer that created "new" first would land on t.csv: compared as it resolves
    assert same_file("new/../t.csv", "t.csv") and same_file("t.csv", "new/x/../../t.csv")
    assert not same_file("new/../u.csv", "t.csv")
    with pytest.raises(OutputPathError, match=r"--out new/\.\./t\.csv goes up \(\.\.\) out of "
                                              r"new, which is not an existing folder"):
        check_output_path("new/../t.csv", "file", "--out")
    with pytest.raises(OutputPathError):
        refuse_output_among_inputs({"--out": "new/../t.csv"}, {"--input": "t.csv"})
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]
