"""The relay's parts that need no training: the lossless pack of a state and its checks, the
digest, why a replay may differ, the speed and time arithmetic, the record's checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from relay import folder as run_folder
from relay import state_pack
from relay.digest import differing_parts, state_digest
from relay.machine import difference_reason
from relay.segment import first_differing_step, strict_json, trained_summary
from relay.training import chunk_steps, trainer_limit
from trainer.time_limit import safety_margin

from .conftest import SMOKE


def _checkpoint(tmp_path: Path, size: int = 300_001) -> Path:
    """A file like a checkpoint: float32 tensors (compressible exponents) and odd bytes."""
    torch.manual_seed(0)
    path = tmp_path / "step_00000005.pt"
    torch.save({"w": torch.randn(size // 4), "tail": b"\x01\x02\x03"}, path)
    return path


@pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 4099])
def test_shuffle_is_undone_for_any_length(length: int) -> None:
    data = bytes(range(256)) * (length // 256 + 1)
    data = data[:length]
    assert state_pack.unshuffle(state_pack.shuffle(data), length) == data


def test_a_packed_checkpoint_unpacks_to_its_bytes_in_parts_under_the_limit(tmp_path) -> None:
    source = _checkpoint(tmp_path)
    manifest = state_pack.pack(source, tmp_path / "state", 5, part_bytes=100_000)
    parts = sorted((tmp_path / "state").glob("part-*.xz"))
    assert len(parts) == len(manifest["parts"]) >= 2
    assert all(part.stat().st_size <= 100_000 for part in parts)
    assert sum(part.stat().st_size for part in parts) < source.stat().st_size
    again, data = state_pack.unpack(tmp_path / "state")
    assert data == source.read_bytes() and again == manifest and again["step"] == 5


@pytest.mark.parametrize("damage", ["flip", "truncate", "missing", "extra_part", "manifest",
                                    "path"])
def test_a_damaged_pack_is_one_error_naming_it(tmp_path, damage: str) -> None:
    state = tmp_path / "state"
    state_pack.pack(_checkpoint(tmp_path), state, 5, part_bytes=100_000)
    part = state / "part-01.xz"
    manifest = json.loads((state / "state.json").read_text())
    if damage == "flip":
        data = bytearray(part.read_bytes())
        data[10] ^= 1
        part.write_bytes(bytes(data))
    elif damage == "truncate":
        part.write_bytes(part.read_bytes()[:-1])
    elif damage == "missing":
        part.unlink()
    elif damage == "extra_part":  # a part added with its own checksum: the bytes are too many
        shutil.copy(part, state / "part-09.xz")
        manifest["parts"].append({**manifest["parts"][1], "file": "part-09.xz"})
    elif damage == "manifest":  # a checkpoint digest that the parts do not give
        manifest["checkpoint"]["sha256"] = "0" * 64
    else:
        manifest["parts"][0]["file"] = "../outside.xz"
    if damage in ("extra_part", "manifest", "path"):
        (state / "state.json").write_text(json.dumps(manifest))
    with pytest.raises(state_pack.StatePackError) as caught:
        state_pack.unpack(state)
    assert "\n" not in str(caught.value) and str(state) in str(caught.value)


def test_the_digest_names_the_parts_that_differ() -> None:
    payload = {"model": {"w": torch.ones(3)}, "ema": {"w": torch.ones(3)},
               "optimizer": {"state": {0: {"exp_avg": torch.zeros(3)}},
                             "param_groups": [{"lr": 1e-3, "params": [0]}]},
               "counters": {"skipped_total": 0}, "step": 5}
    before = state_digest(payload)
    payload["ema"]["w"] = torch.tensor([1.0, 1.0, float.fromhex("0x1.0000000000001p+0")])
    assert differing_parts(before, state_digest(payload)) == []  # float32 rounds it to 1.0
    payload["ema"]["w"] = torch.tensor([1.0, 1.0, 1.0000001])
    after = state_digest(payload)
    assert differing_parts(before, after) == ["ema"] and before["state"] != after["state"]
    payload["ema"]["w"] = torch.ones(3, dtype=torch.float64)  # same values, another dtype
    assert differing_parts(before, state_digest(payload)) == ["ema"]


def test_a_difference_is_explained_by_the_machine_kind_or_the_builds_only() -> None:
    h100 = {"kind": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "torch": "2.11.0+cu130",
            "cuda": "13.0", "threads": None, "host_cpu": "Xeon A", "host_cores": 16}
    h200 = {**h100, "kind": "NVIDIA H200", "host_cpu": "Xeon B"}
    reason = difference_reason(h100, h200)
    assert reason is not None and reason.startswith("machine kind changed")
    assert "H100" in reason and "H200" in reason
    newer = {**h100, "torch": "2.12.0+cu130"}
    assert difference_reason(h100, newer).startswith("software builds changed")
    # the host's CPU does not decide a GPU run's bits
    assert difference_reason(h100, {**h100, "host_cpu": "Xeon B", "host_cores": 32}) is None


def test_the_first_differing_logged_step_and_the_speed_of_the_new_steps() -> None:
    old = [{"kind": "train", "step": s, "loss": 0.5, "grad_norm": 1.0} for s in (4, 8, 12)]
    new = [dict(r) for r in old]
    assert first_differing_step(old, new, 4, 12) is None
    new[2]["loss"] = 0.5000001
    assert first_differing_step(old, new, 4, 12) == 12
    assert first_differing_step(old, new, 4, 8) is None  # outside the replay
    records = [{"kind": "train", "step": 12, "tasks_per_s": 80.0, "data_wait_share": 0.5},
               {"kind": "train", "step": 14, "tasks_per_s": 16.0, "data_wait_share": 0.0},
               {"kind": "train", "step": 8, "tasks_per_s": 1.0, "data_wait_share": 1.0}]
    summary = trained_summary(records, 8, 14, batch=8)
    # 4 steps of 8 tasks in 0.4 s, 2 in 1.0 s: 48 tasks in 1.4 s, 0.2 s of it waiting
    assert summary["tasks_per_s"] == round(48 / 1.4, 1)
    assert summary["data_wait_share"] == round(0.2 / 1.4, 4)
    assert (summary["first_step"], summary["last_step"], summary["steps"]) == (8, 13, 6)
    assert strict_json({"a": [float("nan"), 1.0]}) == {"a": [None, 1.0]}


def test_chunks_are_whole_shards_and_the_trainer_stops_by_the_deadline() -> None:
    assert chunk_steps(None, 90, 200, 25) == 200
    assert chunk_steps(0.1, 90, 200, 25) == 900
    assert chunk_steps(0.13, 90, 200, 25) == 700  # 692 steps, rounded up to whole shards
    assert chunk_steps(100.0, 90, 200, 25) == 25
    for deadline in (10.0, 500.0, 1500.0, 9000.0):
        limit = trainer_limit(deadline)
        assert limit - safety_margin(limit) == pytest.approx(deadline)


def test_a_run_folder_refuses_a_changed_config_and_a_record_out_of_order(tmp_path) -> None:
    folder = tmp_path / "smoke-run"
    settings = run_folder.init_folder(SMOKE, folder, 3,
                                      {"training.micro_batch_cells": 4000})
    assert settings["total_steps"] == 16 and "micro_batch_cells: 4000" in \
        (folder / "config.yaml").read_text()
    with pytest.raises(run_folder.FolderError, match="initialised once"):
        run_folder.init_folder(SMOKE, folder, 3)
    with pytest.raises(run_folder.FolderError, match="no key 'micro_batch_size_x'"):
        run_folder.init_folder(SMOKE, tmp_path / "other", 3,
                               {"training.micro_batch_size_x": 1})
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("log_every: 1", "log_every: 2"))
    with pytest.raises(run_folder.FolderError, match="frozen at `relay init`"):
        run_folder.read_settings(folder)
    (folder / "relay.jsonl").write_text(json.dumps({"segment": 2}) + "\n")
    with pytest.raises(run_folder.FolderError, match="not the record of segment 1"):
        run_folder.read_record(folder / "relay.jsonl")
