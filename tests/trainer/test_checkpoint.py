"""Checkpoint store: keep-last-K, checksums, fallback, weights-only loading, RNG states."""

from __future__ import annotations

import json
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


def test_damaged_index_names_a_fix_that_works(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    store.save(1, _payload(1))
    store.index_path.write_text("{not json")
    with pytest.raises(CheckpointError, match="delete it, and the next trainer command rebuilds"):
        store.entries()
    store.index_path.unlink()  # what the message says to do
    with pytest.warns(UserWarning, match="rebuilt it"):
        assert [e["step"] for e in store.entries()] == [1]


def _craft_index(store: CheckpointStore, file: str) -> None:
    """The store's index with one more entry, naming ``file`` as the oldest checkpoint."""
    index = json.loads(store.index_path.read_text())
    crafted = {"file": file, "step": 0, "bytes": 7, "sha256": "0" * 64}
    index["checkpoints"].insert(0, crafted)
    store.index_path.write_text(json.dumps(index))


@pytest.mark.parametrize(
    "name", ["../../../victim.txt", "absolute", checkpoint_name(2), "index.json", "sub/x.pt"]
)
def test_index_entry_that_is_not_a_step_file_deletes_nothing(tmp_path, name) -> None:
    """The index decides what rotation deletes: an entry naming anything but its own step
    file (another directory, an absolute path, a newer checkpoint) is refused, not followed."""
    store = CheckpointStore(tmp_path / "a" / "run" / "checkpoints", keep=1)
    store.save(1, _payload(1))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    file = str(victim) if name == "absolute" else name
    _craft_index(store, file)
    before = sorted(p.name for p in store.directory.iterdir())
    with pytest.raises(CheckpointError) as err:
        store.save(2, _payload(2))  # rotation to keep=1 would drop the crafted entry
    message = str(err.value)
    assert repr(file) in message and "nothing was deleted" in message
    assert "\n" not in message
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in store.directory.iterdir()) == before
    with pytest.raises(CheckpointError, match="nothing was deleted"):
        store.latest()


def test_crafted_index_fails_the_commands_with_one_line(tmp_path, capsys) -> None:
    from trainer.cli import main as trainer_cli

    store = CheckpointStore(tmp_path / "run" / "checkpoints")
    store.save(4, _payload(4))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    _craft_index(store, "../../victim.txt")
    assert trainer_cli(["export", str(tmp_path / "run"), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'../../victim.txt'" in err
    assert victim.read_text() == "keep me" and not (tmp_path / "w").exists()


def test_missing_index_is_rebuilt_from_the_step_files_that_load(tmp_path) -> None:
    store = CheckpointStore(tmp_path, keep=4)
    for step in (4, 8, 12):
        store.save(step, _payload(step))
    written = {e["step"]: e for e in store.entries()}
    (tmp_path / checkpoint_name(8)).write_bytes(b"garbage")  # damaged: left out
    # a copy under another step's name holds step 12: left out, not trusted by its name
    (tmp_path / checkpoint_name(16)).write_bytes((tmp_path / checkpoint_name(12)).read_bytes())
    (tmp_path / "step_0004.pt").write_bytes(b"not a name the trainer writes")
    store.index_path.unlink()
    with pytest.warns(UserWarning, match=r"rebuilt it from the step files of steps \[4, 12\]"):
        entries = store.entries()
    assert entries == [written[4], written[12]]  # same names, sizes and checksums
    assert json.loads(store.index_path.read_text())["checkpoints"] == entries
    path, payload = store.latest()
    assert path.name == checkpoint_name(12) and payload["step"] == 12


def test_missing_index_with_unreadable_step_files_is_an_error(tmp_path) -> None:
    (tmp_path / checkpoint_name(3)).write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"none of the step files .* can be read"):
        CheckpointStore(tmp_path).entries()
    assert not (tmp_path / "index.json").exists()


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
