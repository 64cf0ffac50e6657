"""Writing and reading shards (zarr and webdataset): round trip, integrity, bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prior_gen_testlib import data_digest, shard_digests, tiny_config, with_format

from prior_gen.generate import generate_step
from prior_gen.runner import plan_jobs, run_generation
from prior_gen.shards import open_shards
from prior_gen.shards.errors import ShardCorruptError, ShardMismatchError
from prior_gen.shards.storage import WriterLock, WriterLockedError

FORMATS = ("zarr", "webdataset")


@pytest.fixture(scope="module", params=FORMATS)
def written(request, tmp_path_factory) -> tuple[Path, object]:
    config = with_format(tiny_config(), request.param)
    out = tmp_path_factory.mktemp(request.param)
    run_generation(config, "train", [1, 2, 3, "tail"], out)
    return out, config


def test_round_trip_is_exact(written) -> None:
    out, config = written
    reader = open_shards(out)
    assert reader.global_batch == 8 and reader.config_hash == config.hash()
    assert reader.stages() == [1, 2, 3, "tail"]
    for stage in (1, 3, "tail"):
        for step in range(4):
            assert data_digest(reader.read_step(stage, step)) == data_digest(
                generate_step(config, "train", stage, step)
            )
    tasks = reader.read_step(2, 3, start=2, stop=5)
    assert [t.meta["index"] for t in tasks] == [26, 27, 28]  # task i is in step i // 8
    assert all(t.meta["step"] == 3 and t.meta["stage"] == 2 for t in tasks)
    assert tasks[0].x.dtype == np.float32 and tasks[0].y.dtype == np.int8
    assert tasks[0].x.flags.writeable and tasks[0].y.flags.writeable  # callers may normalize
    assert reader.read_step(1, 0, 4, 4) == []
    with pytest.raises(ValueError, match=r"task range \[3, 9\) is outside a step of 8 tasks"):
        reader.read_step(1, 0, 3, 9)


def test_manifest_lists_what_exists(written) -> None:
    out, config = written
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_hash"] == config.hash() and manifest["seed"] == 0
    assert manifest["config"]["curriculum"]["global_batch"] == 8
    summary = manifest["summary"]["train"]
    assert set(summary) == {"1", "2", "3", "tail"}
    assert all(s["tasks"] == 32 and s["steps"] == 4 and s["shards"] == 2 for s in summary.values())
    reader = open_shards(out)
    assert reader.available_steps(3) == [0, 1, 2, 3]
    assert reader.has_step("tail", 3) and not reader.has_step("tail", 4)


def test_missing_steps_name_the_command(tmp_path: Path) -> None:
    config = tiny_config()
    run_generation(config, "train", [2], tmp_path, steps=(1, 1), config_path="configs/smoke.yaml")
    reader = open_shards(tmp_path)
    assert reader.available_steps(2) == [0, 1]  # --steps is rounded out to whole shards
    with pytest.raises(ShardMismatchError) as err:
        reader.read_step(2, 3)
    message = str(err.value)
    assert "stages 2: steps 3 missing" in message
    assert "prior-gen --config configs/smoke.yaml --seed 0 --split train --format zarr" in message
    assert "--stages 2 --steps 3-3 --out" in message
    with pytest.raises(ShardMismatchError, match=r"stages 1: steps 0-3 missing"):
        reader.require_steps({1: range(4), 2: range(2)})
    reader.require_steps({2: [0, 1]})
    with pytest.raises(ShardMismatchError) as err:  # stages missing the same steps: one command
        reader.require_steps({1: range(4), 2: range(4), 3: range(4), "tail": range(4)})
    lines = str(err.value).splitlines()[1:]
    assert len(lines) == 2
    assert "stages 1,3,tail: steps 0-3 missing" in lines[0]
    assert lines[0].endswith(f"--stages 1,3,tail --steps 0-3 --out {tmp_path}")
    assert "stages 2: steps 2-3 missing" in lines[1]
    with pytest.raises(ShardMismatchError, match="has no 'val' split"):
        open_shards(tmp_path, split="val")


def test_config_checks(tmp_path: Path) -> None:
    config = tiny_config()
    with pytest.raises(ShardMismatchError, match=r"manifest\.json not found"):
        open_shards(tmp_path)
    run_generation(config, "train", [1], tmp_path, steps=(0, 0))
    reader = open_shards(tmp_path, expected_hash=config.hash())
    other = config.with_seed(5)
    with pytest.raises(ShardMismatchError, match=r"differences, asked vs stored: seed: 5 vs 0"):
        reader.check_config(other)
    with pytest.raises(ShardMismatchError, match="generated from config hash"):
        open_shards(tmp_path, expected_hash=other.hash())
    # another config into the same directory is refused, naming the difference
    with pytest.raises(ShardMismatchError, match=r"holds shards of another configuration.*seed: 5"):
        run_generation(other, "train", [1], tmp_path, steps=(0, 0))
    with pytest.raises(ShardMismatchError, match=r"other shard settings.*format"):
        run_generation(with_format(config, "webdataset"), "train", [1], tmp_path, steps=(0, 0))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(manifest.read_text()[:-20])  # a truncated manifest
    with pytest.raises(ShardCorruptError, match=r"manifest\.json is corrupt \(not valid JSON"):
        open_shards(tmp_path)


def test_both_splits_share_a_directory(tmp_path: Path) -> None:
    config = tiny_config()
    run_generation(config, "train", [1], tmp_path, steps=(0, 1))
    run_generation(config, "val", [1], tmp_path, steps=(0, 1))
    train, val = open_shards(tmp_path, "train"), open_shards(tmp_path, "val")
    assert data_digest(train.read_step(1, 0)) != data_digest(val.read_step(1, 0))
    assert val.read_step(1, 1)[0].meta["seed_key"][1] == 1  # the val split code
    assert data_digest(val.read_step(1, 1)) == data_digest(generate_step(config, "val", 1, 1))


def _first_chunk(out: Path, fmt: str) -> Path:
    suffix = "x/c/0/0" if fmt == "zarr" else ""
    shard = out / "train" / "stage-001" / f"shard-000000.{'zarr' if fmt == 'zarr' else 'tar'}"
    return shard / suffix if suffix else shard


@pytest.mark.parametrize("fmt", FORMATS)
def test_corruption_is_detected_and_repaired(tmp_path: Path, fmt: str) -> None:
    config = with_format(tiny_config(), fmt)
    run_generation(config, "train", [1], tmp_path)
    before = shard_digests(tmp_path)
    target = _first_chunk(tmp_path, fmt)
    data = bytearray(target.read_bytes())
    data[700] ^= 0xFF  # inside the first step's x data
    target.write_bytes(bytes(data))
    with pytest.raises(ShardCorruptError) as err:
        open_shards(tmp_path).read_step(1, 0)
    shard_name = "stage-001/shard-000000." + ("zarr" if fmt == "zarr" else "tar")
    assert f"{shard_name} is corrupt" in str(err.value)
    assert err.value.path == str(tmp_path / "train" / shard_name)
    assert open_shards(tmp_path).verify() == [str(tmp_path / f"train/{shard_name}")]
    summary = run_generation(config, "train", [1], tmp_path)
    assert summary.regenerated == [f"train/{shard_name}"] and summary.written == 1
    assert summary.reused == 1
    assert shard_digests(tmp_path) == before
    assert open_shards(tmp_path).verify() == []


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    config = tiny_config()
    with WriterLock(tmp_path), pytest.raises(WriterLockedError) as err:
        run_generation(config, "train", [1], tmp_path)
    assert "another prior-gen is writing into" in str(err.value)
    assert f"pid {__import__('os').getpid()}" in str(err.value)
    run_generation(config, "train", [1], tmp_path)  # released: fine now


def test_plan_rounds_steps_out_to_whole_shards() -> None:
    config = tiny_config(curriculum={"steps_per_stage": 7}, shards={"steps_per_shard": 3})
    jobs = plan_jobs(config, "train", [1], (4, 6))
    assert [(j.first_step, j.n_steps) for j in jobs] == [(3, 3), (6, 1)]
    with pytest.raises(ValueError, match=r"steps 5-7 are outside 0\.\.6 of stage 1"):
        plan_jobs(config, "train", [1], (5, 7))


def test_a_failed_zarr_read_leaves_no_pending_read_behind() -> None:
    """A damaged chunk fails one of the three concurrent reads of a step; the others must be
    finished (cancelled) before the error surfaces, or Python prints "Task was destroyed but it
    is pending!" at exit (seen after the trainer found a corrupt shard at start-up)."""
    import asyncio
    from types import SimpleNamespace

    from prior_gen.shards.zarr_format import _read_concurrently

    cancelled = []

    async def damaged(selection):
        raise ValueError("checksum mismatch")

    async def slow(selection):  # a read still in flight when the other one fails
        try:
            await asyncio.Event().wait()  # never set: only a cancellation ends it
        except asyncio.CancelledError:
            cancelled.append(selection)
            raise

    arrays = [SimpleNamespace(_async_array=SimpleNamespace(getitem=f)) for f in (slow, damaged)]
    with pytest.raises(ValueError, match="checksum mismatch"):
        _read_concurrently(arrays, ["x-row", "meta-row"])
    assert cancelled == ["x-row"]
