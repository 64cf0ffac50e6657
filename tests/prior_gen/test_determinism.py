"""Same command, same bytes: any worker count, joblib backend, dask, and after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prior_gen_testlib import REPO, SMOKE, shard_digests, tiny_config, with_format

from prior_gen.runner import run_generation
from prior_gen.shards.faults import ENV_VAR, parse_kill_after
from prior_gen.shards.storage import TEMP_MARK
from puicl_common.configio import load_yaml

STAGES = [1, 2, 3, "tail"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Shard digests of an in-process, single-worker run, for both formats."""
    digests = {}
    for fmt in ("zarr", "webdataset"):
        out = tmp_path_factory.mktemp(f"ref-{fmt}")
        run_generation(with_format(tiny_config(), fmt), "train", STAGES, out, workers=1)
        digests[fmt] = shard_digests(out)
    assert len(digests["zarr"]) == 8
    return digests


@pytest.mark.slow  # worker pools
@pytest.mark.parametrize(
    ("fmt", "backend"),
    [("zarr", "loky"), ("zarr", "multiprocessing"), ("webdataset", "loky")],
)
def test_two_workers_give_the_same_bytes(reference, tmp_path: Path, fmt: str, backend: str) -> None:
    config = with_format(tiny_config(), fmt)
    run_generation(config, "train", STAGES, tmp_path, workers=2, backend=backend)
    assert shard_digests(tmp_path) == reference[fmt]


@pytest.mark.slow  # worker pools
def test_the_multiprocessing_backend_never_forks_this_process(
    reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork copies the locks other threads hold, and a worker that inherits a held one
    hangs; the pool's workers come from a fork server (its own process) instead."""

    def refuse_fork() -> int:
        raise AssertionError("the multiprocessing backend forked the generating process")

    monkeypatch.setattr(os, "fork", refuse_fork)
    run_generation(tiny_config(), "train", STAGES, tmp_path, workers=2,
                   backend="multiprocessing")
    assert shard_digests(tmp_path) == reference["zarr"]


@pytest.mark.slow  # a dask cluster of worker processes
def test_dask_local_cluster_gives_the_same_bytes(reference, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    # real worker processes, scheduler on loopback, as a multi-machine run would use
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        run_generation(
            tiny_config(),
            "train",
            STAGES,
            tmp_path,
            workers=2,
            backend="dask",
            scheduler=cluster.scheduler_address,
        )
    assert shard_digests(tmp_path) == reference["zarr"]


def _one_step_shards_config(path: Path) -> Path:
    """The smoke config with one step per shard: 16 shards, so a run can die in the middle."""
    data = load_yaml(SMOKE)
    data["shards"]["steps_per_shard"] = 1
    path.write_text(yaml.safe_dump(data))
    return path


def test_kill_and_resume_gives_the_same_bytes(tmp_path: Path) -> None:
    from prior_gen.config import load_generation_config

    config_path = _one_step_shards_config(tmp_path / "one_step.yaml")
    config = load_generation_config(config_path)
    killed = tmp_path / "killed"
    run_generation(config, "train", [1], killed)  # recorded in the manifest before the crash
    before = {
        r["path"]: (killed / r["path"]).stat().st_mtime_ns
        for r in json.loads((killed / "manifest.json").read_text())["splits"]["train"]["1"].values()
    }
    assert len(before) == 4
    # the fault hook SIGKILLs prior-gen right after its 3rd new shard is published, before
    # that shard's record reaches the manifest (prior_gen/shards/faults.py): no race with a poll
    command = [sys.executable, "-m", "prior_gen.cli", "--config", str(config_path),
               "--out", str(killed), "--workers", "1"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True,
                          env={**os.environ, ENV_VAR: "kill@3"})  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    on_disk = {p.relative_to(killed).as_posix() for p in killed.glob("train/*/shard-*.zarr")}
    assert len(on_disk) == 4 + 3
    shards = json.loads((killed / "manifest.json").read_text())["splits"]["train"]
    listed = {r["path"] for stage in shards.values() for r in stage.values()}
    assert set(before) <= listed < on_disk  # at least the last shard is on disk, unrecorded
    assert not [p for p in killed.rglob("*") if TEMP_MARK in p.name]

    summary = run_generation(config, "train", STAGES, killed)
    assert summary.reused == len(listed) and summary.written == 16 - len(listed)
    for path, mtime in before.items():  # shards already recorded were kept, not rewritten
        assert (killed / path).stat().st_mtime_ns == mtime

    fresh = tmp_path / "fresh"
    run_generation(config, "train", STAGES, fresh, workers=2)
    assert shard_digests(killed) == shard_digests(fresh)


def test_fault_hook_parses_only_kill_after_n() -> None:
    assert parse_kill_after(None) is None and parse_kill_after("kill@3") == 3
    for bad in ("kill@0", "kill@x", "stop@3"):
        with pytest.raises(ValueError, match=ENV_VAR):
            parse_kill_after(bad)
