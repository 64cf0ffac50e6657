"""``prior-gen`` when something is off: configs that would silently mean the paper's run,
manifests that point outside their directory, unwritable outputs, and interruptions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prior_gen_testlib import PAPER, REPO, SMOKE

from prior_gen import runner
from prior_gen.cli import main
from prior_gen.config import load_generation_config
from prior_gen.paper.curriculum import all_stages
from prior_gen.runner import plan_jobs, run_generation
from prior_gen.shards import open_shards
from prior_gen.shards.errors import ShardCorruptError


def _only_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize(
    "content",
    [
        "",
        "seed: 3\n",
        yaml.safe_dump({"prior": yaml.safe_load(SMOKE.read_text())["prior"]}),
        "curriculum: {}\n",
    ],
    ids=["empty", "seed only", "prior only", "empty curriculum"],
)
def test_config_without_a_curriculum_is_refused(tmp_path, capsys, monkeypatch, content) -> None:
    """Every curriculum key has the paper's default: such a config would start the paper's
    4.8 million tasks. It is refused before anything is planned or written."""
    def must_not_run(*args, **kwargs):
        raise AssertionError("generation started")

    monkeypatch.setattr(runner, "run_generation", must_not_run)
    config = tmp_path / "partial.yaml"
    config.write_text(content)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", str(config), "--out", str(out)])
    assert exit_info.value.code == 2
    line = _only_line(capsys.readouterr().err)
    assert line.startswith("prior-gen: error: ") and "no 'curriculum' section" in line
    assert not out.exists()


def test_the_plan_and_its_size_are_announced_before_writing(tmp_path, capsys) -> None:
    out = tmp_path / "shards"
    argv = ["--config", str(SMOKE), "--stages", "1-3,tail", "--out", str(out), "--workers", "1"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert _only_line(captured.err) == (
        f"prior-gen: generating 8 shard(s) of the train split of {SMOKE} into {out} "
        "(stages 1-3,tail: 16 steps, 128 tasks), an estimated 152.4 kB, its SCMs about "
        "303.9 kB of memory per process"
    )
    assert main(argv) == 0  # nothing left to generate: nothing announced
    assert capsys.readouterr().err == ""

    from prior_gen.runner import estimated_bytes

    seen = []
    config = load_generation_config(SMOKE)

    def on_plan(jobs, reused) -> None:
        seen.append((len(jobs), reused, sorted(p.name for p in other.rglob("shard-*"))))

    other = tmp_path / "other"
    summary = run_generation(config, "train", [1, 2], other, on_plan=on_plan)
    assert seen == [(4, 0, [])]  # called once, before the first shard
    estimate = estimated_bytes(config, plan_jobs(config, "train", [1, 2]))
    assert 0.5 < summary.bytes_written / estimate < 2


def test_the_paper_run_estimate_is_of_the_stored_size() -> None:
    """docs/training.md: the paper's whole train split is ≈ 92 GB of zarr shards."""
    from prior_gen.runner import estimated_bytes

    config = load_generation_config(PAPER)
    jobs = plan_jobs(config, "train", all_stages(config.curriculum))
    assert 60e9 < estimated_bytes(config, jobs) < 140e9


@pytest.fixture
def one_shard(tmp_path) -> Path:
    out = tmp_path / "shards"
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(out),
            "--workers", "1"]
    assert main(argv) == 0
    return out


@pytest.mark.parametrize("where", ["../victim", "absolute", "train/stage-002/shard-000000.zarr"])
def test_manifest_paths_outside_their_place_are_refused(one_shard, tmp_path, capsys, where):
    victim = tmp_path / "victim"
    victim.write_text("not a shard")
    manifest_path = one_shard / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    record = manifest["splits"]["train"]["1"]["000000"]
    record["path"] = str(victim) if where == "absolute" else where
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()

    with pytest.raises(ShardCorruptError, match="nothing was read from it"):
        open_shards(one_shard)
    assert main(["inspect", str(one_shard), "--verify"]) == 1
    assert repr(record["path"]) in _only_line(capsys.readouterr().err)
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(one_shard),
            "--workers", "1"]
    assert main(argv) == 1
    assert "nothing was read from it" in _only_line(capsys.readouterr().err)
    assert victim.read_text() == "not a shard"


def test_inspect_a_file_or_plot_where_it_cannot_write(one_shard, tmp_path, capsys) -> None:
    manifest = one_shard / "manifest.json"
    assert main(["inspect", str(manifest)]) == 2
    assert "is a file: give the shard directory" in _only_line(capsys.readouterr().err)
    below_a_file = manifest / "stats.png"
    assert main(["inspect", str(one_shard), "--plot", str(below_a_file)]) == 2
    captured = capsys.readouterr()
    assert f"{manifest} is a file, not a directory" in _only_line(captured.err)
    assert captured.out == ""  # refused before the report


def test_inspect_plot_into_a_read_only_place(one_shard, capsys, read_only_place) -> None:
    place = read_only_place
    assert main(["inspect", str(one_shard), "--plot", str(place / "stats.png")]) == 2
    assert f"cannot write {place / 'stats.png'}" in _only_line(capsys.readouterr().err)


def _wait_for(condition, what: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"prior-gen ended (status {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {what} within {timeout} s")
        time.sleep(0.05)


@pytest.mark.slow  # a generation subprocess, with a worker pool for workers=2
@pytest.mark.parametrize(("workers", "signum"), [
    ("1", signal.SIGINT), ("2", signal.SIGINT), ("2", signal.SIGTERM),
], ids=["ctrl-c-one-process", "ctrl-c-workers", "sigterm-workers"])
def test_interrupted_generation_says_one_line_and_exits_130(tmp_path, workers, signum) -> None:
    """Ctrl-C (sent to the whole process group, as a terminal does) or SIGTERM while shards
    are being written: one line, status 130, no traceback or leaked-semaphore warning, and
    the same command then completes the directory."""
    data = yaml.safe_load(SMOKE.read_text())
    data["curriculum"]["steps_per_stage"] = 200  # enough to be still running when signalled
    config = tmp_path / "longer.yaml"
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "shards"
    command = [sys.executable, "-m", "prior_gen.cli", "--config", str(config), "--stages", "1-3",
               "--out", str(out), "--workers", workers]

    def own_group_with_default_sigint() -> None:
        os.setsid()  # the group a terminal would signal, without this test in it
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # even when pytest runs in the background

    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=own_group_with_default_sigint)
    _wait_for(lambda: any(out.glob("train/stage-001/shard-*")), "first shard", process)
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("prior-gen: generating 300 shard(s)") and len(lines) == 2, stderr
    assert lines[1].startswith("prior-gen: interrupted; finished shards are kept")
    assert stdout == ""

    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    assert len(list(out.glob("train/stage-*/shard-*"))) == 300


def test_a_link_inside_the_shard_directory_is_refused_and_its_target_kept(tmp_path,
                                                                          capsys) -> None:
    """prior-gen writes the manifest and shards inside --out with atomic writes, which follow
    links: a link planted there (a copied or downloaded shard folder) is refused, named."""
    out = tmp_path / "shards"
    out.mkdir()
    victim = tmp_path / "outside.json"
    victim.write_text("precious")
    (out / "manifest.json").symlink_to(victim)
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(SMOKE), "--stages", "1", "--steps", "0", "--out", str(out)])
    assert stop.value.code == 2
    line = _only_line(capsys.readouterr().err)
    assert f"holds a symbolic link, {out / 'manifest.json'} -> {victim}" in line
    assert victim.read_text() == "precious"


def test_a_temporary_that_becomes_a_directory_while_it_is_removed_is_removed(
        tmp_path, monkeypatch) -> None:
    """An interrupt unwinds the main thread while a store's writer thread still creates the
    shard's temporary directory: the cleanup sees no directory, then unlink meets one. It
    removes the tree instead of raising, which would replace the interrupt (exit 1, not 130)."""
    from prior_gen.shards import storage

    tmp = tmp_path / ".shard-000002.zarr.tmp-1-abcd"
    tmp.mkdir()
    (tmp / "chunk").write_bytes(b"x")
    # the first check ran before the writer thread created the directory
    monkeypatch.setattr(Path, "is_dir", _first_answer_false(tmp, Path.is_dir))
    storage.remove_path(tmp)
    assert not tmp.exists()


def _first_answer_false(target: Path, real):
    answered: list[bool] = []

    def is_dir(self: Path) -> bool:
        if self == target and not answered:
            answered.append(True)
            return False
        return real(self)

    return is_dir


def _plant(path: Path, kind: str, target: Path) -> None:
    """A ``kind`` entry at ``path``, in place of whatever stood there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    if kind == "link":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # a character device with /dev/null's numbers
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))


WORDS = {"link": "a symbolic link", "fifo": "a FIFO", "device": "a character device"}


@pytest.mark.parametrize("where", ["manifest.json", "train/stage-001/shard-000000.zarr/zarr.json",
                                   ".prior-gen.lock"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_fifos_and_devices_in_a_shard_directory_are_refused(one_shard, tmp_path, capsys,
                                                            where, kind) -> None:
    """``cp -r`` and ``tar`` keep FIFOs and device nodes: ``prior-gen`` and ``prior-gen
    inspect`` refuse the directory in one line naming the entry, without opening it (a FIFO
    would hang them)."""
    entry = one_shard / where
    _plant(entry, kind, tmp_path)
    capsys.readouterr()
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(one_shard),
            "--workers", "1"]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert f"{WORDS[kind]}, {entry}" in _only_line(capsys.readouterr().err)
    assert main(["inspect", str(one_shard), "--verify"]) == 2
    assert f"{WORDS[kind]}, {entry}" in _only_line(capsys.readouterr().err)


def test_a_fifo_manifest_is_refused_by_the_reader(one_shard, tmp_path) -> None:
    _plant(one_shard / "manifest.json", "fifo", tmp_path)
    with pytest.raises(OSError, match="a FIFO"):
        open_shards(one_shard)


@pytest.mark.parametrize("kind", ["link", "fifo", "device"])
def test_an_entry_planted_while_generating_receives_nothing(one_shard, tmp_path, kind) -> None:
    """After the start-up check, a link, FIFO or device put at a shard's place or at the
    manifest is refused by the write itself; a link's target keeps its bytes."""
    from prior_gen.runner import ShardJob, write_shard
    from prior_gen.shards.manifest import load_manifest, write_manifest

    victim = tmp_path / "outside.bin"
    victim.write_bytes(b"precious")
    config = load_generation_config(SMOKE)
    shard = one_shard / "train" / "stage-001" / "shard-000002.zarr"
    _plant(shard, kind, victim)
    with pytest.raises(OSError, match=WORDS[kind]):
        write_shard(config, ShardJob("train", 1, 2, 2), str(one_shard))
    assert os.path.lexists(shard) and not shard.is_dir()
    manifest = load_manifest(one_shard)
    _plant(one_shard / "manifest.json", kind, victim)
    with pytest.raises(OSError, match=WORDS[kind]):
        write_manifest(one_shard, manifest)
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00\x01 binary"], ids=["empty", "binary"])
def test_an_empty_or_binary_manifest_is_named(one_shard, capsys, content) -> None:
    manifest = one_shard / "manifest.json"
    manifest.write_bytes(content)
    capsys.readouterr()
    assert main(["inspect", str(one_shard)]) == 1
    line = _only_line(capsys.readouterr().err)
    assert f"{manifest} is corrupt" in line
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(one_shard),
            "--workers", "1"]
    assert main(argv) == 1
    assert f"{manifest} is corrupt" in _only_line(capsys.readouterr().err)
    assert manifest.read_bytes() == content


def test_a_scheduler_that_is_no_address_is_refused_before_anything_is_written(
        tmp_path, capsys) -> None:
    out = tmp_path / "shards"
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(SMOKE), "--stages", "1", "--out", str(out), "--scheduler", "foo"])
    assert stop.value.code == 2
    line = _only_line(capsys.readouterr().err)
    assert line.startswith("prior-gen: error: cannot reach the dask scheduler at foo: ")
    assert not out.exists()


def test_a_run_larger_than_the_cap_is_refused_unless_forced(tmp_path, capsys,
                                                            monkeypatch) -> None:
    """Sizes within their bounds can still multiply to terabytes: refused before anything is
    written, naming the estimate; --force lets a run larger than the disk's free space go."""
    def must_not_run(*args, **kwargs):
        raise AssertionError("generation started")

    data = yaml.safe_load(SMOKE.read_text())
    data["curriculum"]["global_batch"] = 10**8
    config = tmp_path / "huge.yaml"
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "shards"
    with monkeypatch.context() as patched:
        patched.setattr(runner, "run_generation", must_not_run)
        with pytest.raises(SystemExit) as stop:
            main(["--config", str(config), "--out", str(out)])
    assert stop.value.code == 2
    line = _only_line(capsys.readouterr().err)
    assert "the most prior-gen writes without --force" in line and "GB" in line
    assert not out.exists()

    import shutil as shutil_module

    full = shutil_module._ntuple_diskusage(total=10**9, used=10**9 - 1000, free=1000)
    monkeypatch.setattr(shutil_module, "disk_usage", lambda path: full)
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0", "--out", str(out),
            "--workers", "1"]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert "the free space on" in _only_line(capsys.readouterr().err)
    assert not out.exists()
    assert main([*argv, "--force"]) == 0


def _wide_and_deep(tmp_path: Path) -> Path:
    """The smoke config at the largest SCM its bounds allow: width 1,024, depth 64 (each task
    66 million weights; one step of 8 tasks held 6.25 GB where 17.7 kB was announced)."""
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"].update(width=[1024, 1024], depth=[64, 64])
    config = tmp_path / "wide.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def test_the_memory_estimate_accounts_for_the_scms_size(tmp_path) -> None:
    config = load_generation_config(_wide_and_deep(tmp_path))
    jobs = plan_jobs(config, "train", [1])
    assert 6.25e9 <= runner.estimated_memory(config, jobs) < 8e9
    small = load_generation_config(SMOKE)
    assert runner.estimated_memory(small, plan_jobs(small, "train", [1])) < 1e6


def test_a_run_past_the_machines_memory_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch) -> None:
    from prior_gen import cli

    def must_not_run(*args, **kwargs):
        raise AssertionError("generation started")

    monkeypatch.setattr(runner, "run_generation", must_not_run)
    monkeypatch.setattr(cli, "_physical_memory", lambda: 4 * 10**9)
    config = _wide_and_deep(tmp_path)
    out = tmp_path / "shards"
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(config), "--stages", "1", "--steps", "0-1", "--out", str(out),
              "--workers", "1"])
    assert stop.value.code == 2
    line = _only_line(capsys.readouterr().err)
    assert line.startswith(f"prior-gen: error: {config}'s SCMs would hold an estimated 6.")
    assert "more than this machine's memory (4.0 GB)" in line and "--force" in line
    assert not out.exists()  # no manifest.json, no lock
    with pytest.raises(SystemExit):  # two workers hold two steps at once
        main(["--config", str(config), "--stages", "1", "--out", str(out), "--workers", "2"])
    assert "(2 processes)" in _only_line(capsys.readouterr().err)


def test_an_interrupt_before_a_write_is_scheduled_leaves_no_warning(monkeypatch, capsys) -> None:
    """Ctrl-C between the creation of a storage coroutine and its scheduling: the coroutine is
    collected unawaited as ``main`` returns, and Python's warning of it would follow the one
    line; ``main`` silences exactly that warning."""
    import gc
    import warnings

    async def write() -> None:  # stands in for zarr's coroutines
        return None

    def interrupted(argv) -> int:
        pending = write()  # noqa: F841  (created, never awaited; held by the traceback)
        raise KeyboardInterrupt

    monkeypatch.setattr("prior_gen.cli._generate", interrupted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["--stages", "1"]) == 130
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert capsys.readouterr().err.strip().splitlines() == [
        "prior-gen: interrupted; finished shards are kept, and the same command continues "
        "from them"]
