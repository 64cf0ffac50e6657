"""Checkpoint store: keep-last-K, checksums, fallback, weights-only loading, RNG states."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from trainer.checkpoint import (
    CheckpointError,
    CheckpointStore,
    capture_rng_state,
    checkpoint_name,
    restore_rng_state,
)


def _payload(value: float) -> dict:
    return {"model": {"w": torch.full((3,), value)}, "counters": {"skipped_total": 1}}


def test_keep_last_k_and_index(tmp_path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    for step in (10, 20, 30):
        store.save(step, _payload(step))
    files = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert files == [checkpoint_name(20), checkpoint_name(30)]
    assert [e["step"] for e in store.entries()] == [20, 30]
    assert not list(tmp_path.glob("*.tmp"))  # no temporary files left behind
    path, payload = store.latest()
    assert path.name == checkpoint_name(30) and payload["step"] == 30
    assert torch.equal(payload["model"]["w"], torch.full((3,), 30.0))


def test_damaged_newest_falls_back_with_warning(tmp_path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    store.save(1, _payload(1))
    newest = store.save(2, _payload(2))
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="sha256 differs"):
        _, payload = store.latest()
    assert payload["step"] == 1
    with pytest.raises(CheckpointError, match="is damaged: its sha256 differs"):
        store.load(newest)


def test_all_damaged_is_an_error(tmp_path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    store.save(5, _payload(5)).write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="can be read"):
        store.latest()


def test_empty_store_has_no_latest(tmp_path) -> None:
    assert CheckpointStore(tmp_path / "none").latest() is None


def test_pickled_objects_are_refused(tmp_path) -> None:
    # a file that would run code when unpickled must not load (weights_only=True)
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"format": 1, "step": 0, "x": Evil()}, path)
    with pytest.warns(UserWarning, match="not listed"), pytest.raises(
        CheckpointError, match="cannot read checkpoint"
    ):
        CheckpointStore(tmp_path).load(path)


def test_damaged_index_names_the_fix(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    store.save(1, _payload(1))
    store.index_path.write_text("{not json")
    with pytest.raises(CheckpointError, match="delete it and pass --resume PATH"):
        store.entries()


def test_rng_state_round_trip_through_a_weights_only_file(tmp_path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    store = CheckpointStore(tmp_path)
    store.save(1, {"rng": capture_rng_state()})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    _, payload = store.latest()
    restore_rng_state(payload["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_export_refuses_a_damaged_newest_checkpoint(tmp_path, capsys) -> None:
    """Export must not fall back to an older step on its own (auto-resume may, export not)."""
    from trainer.cli import main as trainer_cli
    from trainer.export import load_run_checkpoint

    store = CheckpointStore(tmp_path / "run" / "checkpoints", keep=3)
    store.directory.mkdir(parents=True)
    store.save(4, _payload(4))
    store.save(6, _payload(6)).write_bytes(b"garbage")
    newest = checkpoint_name(6)
    with pytest.raises(CheckpointError, match=rf"{newest}.*pass --step N \(readable: \[4\]\)"):
        load_run_checkpoint(tmp_path / "run")
    assert trainer_cli(["export", str(tmp_path / "run"), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert newest in err and "--step" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()
    # the older step stays exportable on purpose
    assert load_run_checkpoint(tmp_path / "run", 4)[1]["step"] == 4
