"""Same command, same bytes: any worker count, joblib backend, dask, and after a SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prior_gen_testlib import REPO, SMOKE, shard_digests, tiny_config, with_format

from prior_gen.runner import run_generation
from prior_gen.storage import TEMP_MARK

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


@pytest.mark.parametrize(
    ("fmt", "backend"),
    [("zarr", "loky"), ("zarr", "multiprocessing"), ("webdataset", "loky")],
)
def test_two_workers_give_the_same_bytes(reference, tmp_path: Path, fmt: str, backend: str) -> None:
    config = with_format(tiny_config(), fmt)
    run_generation(config, "train", STAGES, tmp_path, workers=2, backend=backend)
    assert shard_digests(tmp_path) == reference[fmt]


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


def _slow_config(path: Path) -> Path:
    """A config whose run lasts a few seconds: 60 one-step shards of bigger tasks."""
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"].update(depth=[7, 9], width=[24, 32])
    data["prior"]["dataset"] = {"n_features": [3, 8], "n_labeled": [300, 500]}
    data["curriculum"].update(stages=6, steps_per_stage=10, tail_steps=0, global_batch=12)
    data["shards"]["steps_per_shard"] = 1
    path.write_text(yaml.safe_dump(data))
    return path


def test_kill_and_resume_gives_the_same_bytes(tmp_path: Path) -> None:
    from prior_gen.config import load_generation_config

    config_path = _slow_config(tmp_path / "slow.yaml")
    config = load_generation_config(config_path)
    stages = [1, 2, 3, 4, 5, 6]
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "prior_gen.cli", "--config", str(config_path),
               "--out", str(killed), "--workers", "1"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if len(list(killed.glob("train/stage-*/shard-*.zarr"))) >= 3:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    on_disk = len(list(killed.glob("train/stage-*/shard-*.zarr")))
    assert 3 <= on_disk < 60
    listed: dict[str, int] = {}
    if (killed / "manifest.json").exists():  # written at most once a second
        shards = json.loads((killed / "manifest.json").read_text())["splits"]["train"]
        listed = {
            r["path"]: (killed / r["path"]).stat().st_mtime_ns
            for stage in shards.values()
            for r in stage.values()
        }

    summary = run_generation(config, "train", stages, killed)
    assert summary.reused == len(listed) and summary.written == 60 - len(listed)
    for path, mtime in listed.items():  # shards already recorded were kept, not rewritten
        assert (killed / path).stat().st_mtime_ns == mtime
    assert not [p for p in killed.rglob("*") if TEMP_MARK in p.name]

    fresh = tmp_path / "fresh"
    run_generation(config, "train", stages, fresh, workers=2)
    assert shard_digests(killed) == shard_digests(fresh)
