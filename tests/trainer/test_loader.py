"""The step loader: the same steps in the same order with or without its thread, errors
delivered at their step, no thread left behind; and a run whose weights do not depend on it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from prior_gen.shards.errors import ShardError
from trainer.loader import THREAD_NAME, StepData, StepLoader
from trainer.metrics_log import read_metrics
from trainer.segment import Segment

from .conftest import SMOKE, run_inprocess, state_hash


def _loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def _prepare(global_step: int) -> StepData:
    return StepData(global_step, address=("stage", global_step * 10), micro_batches=[])


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_steps_come_in_order_and_the_thread_ends(prefetch: int) -> None:
    with StepLoader(_prepare, 5, 12, prefetch) as loader:
        steps = [(data.global_step, data.address) for data in loader]
    assert steps == [(s, ("stage", s * 10)) for s in range(5, 12)]
    assert loader.wait_seconds >= 0
    assert not _loader_threads()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_error_reaches_the_consumer_at_its_step(prefetch: int) -> None:
    def prepare(global_step: int) -> StepData:
        if global_step == 3:
            raise ShardError("shard of step 3 is damaged")
        return _prepare(global_step)

    loader = StepLoader(prepare, 0, 8, prefetch)
    assert [next(loader).global_step for _ in range(3)] == [0, 1, 2]  # steps before it train
    with pytest.raises(ShardError, match="step 3 is damaged"):
        next(loader)
    loader.close()
    assert not _loader_threads()


def test_thread_setup_runs_in_the_thread_and_its_error_reaches_the_consumer() -> None:
    names = []
    with StepLoader(_prepare, 0, 3, 1, lambda: names.append(threading.current_thread().name)):
        pass
    assert names == [THREAD_NAME]

    def no_gpu() -> None:
        raise RuntimeError("no CUDA device 3")

    loader = StepLoader(_prepare, 0, 3, 1, no_gpu)
    with pytest.raises(RuntimeError, match="no CUDA device 3"):
        next(loader)
    loader.close()
    assert not _loader_threads()


def test_closing_early_stops_a_producer_waiting_for_room() -> None:
    prepared = []

    def prepare(global_step: int) -> StepData:
        prepared.append(global_step)
        return _prepare(global_step)

    loader = StepLoader(prepare, 0, 1000, prefetch=2)
    assert next(loader).global_step == 0
    deadline = time.monotonic() + 30
    while len(prepared) < 4 and time.monotonic() < deadline:  # 2 queued, 1 waiting for room
        time.sleep(0.01)
    loader.close()
    assert not _loader_threads()
    assert len(prepared) <= 4  # bounded prefetch: it never ran far ahead
    with pytest.raises(StopIteration):
        next(loader)


def test_an_exception_in_the_consumer_leaves_no_thread() -> None:
    with pytest.raises(KeyError), StepLoader(_prepare, 0, 100, prefetch=4) as loader:
        for data in loader:
            if data.global_step == 2:
                raise KeyError("the training step failed")
    assert not _loader_threads()


def _config_with(tmp_path: Path, line: str) -> Path:
    """The smoke config with one more key in its training section."""
    text = SMOKE.read_text()
    assert "  log_every: 1\n" in text
    path = tmp_path / "smoke_variant.yaml"
    path.write_text(text.replace("  log_every: 1\n", f"  log_every: 1\n  {line}\n"))
    return path


def test_weights_do_not_depend_on_prefetching(smoke_shards, tmp_path) -> None:
    ahead = tmp_path / "ahead"  # the default: training.prefetch_steps 2
    inline = tmp_path / "inline"
    assert run_inprocess(ahead, smoke_shards) == 0
    assert run_inprocess(inline, smoke_shards, config=_config_with(tmp_path,
                                                                   "prefetch_steps: 0")) == 0
    assert state_hash(inline) == state_hash(ahead)
    assert not _loader_threads()
    for run_dir in (ahead, inline):
        train = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
        assert len(train) == 16
        assert all(0 <= r["data_wait_share"] <= 1 for r in train)
    # read in the main thread, every step waits for its data
    inline_train = [r for r in read_metrics(inline / "metrics.jsonl") if r["kind"] == "train"]
    assert all(r["data_wait_share"] > 0 for r in inline_train)


def test_a_shard_error_mid_run_stops_cleanly(smoke_shards, tmp_path, monkeypatch, capsys):
    prepare_step = Segment.prepare_step

    def failing(self, global_step):
        if global_step == 5:
            raise ShardError("stage 2 step 1: checksum mismatch")
        return prepare_step(self, global_step)

    monkeypatch.setattr(Segment, "prepare_step", failing)
    run_dir = tmp_path / "failing"
    assert run_inprocess(run_dir, smoke_shards) == 2
    assert "checksum mismatch" in capsys.readouterr().err
    train = [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert train == [1, 2, 3, 4, 5]  # every step before the damaged one trained
    assert not _loader_threads()


def test_sigterm_stops_the_loader_too(smoke_shards, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PUICL_TRAINER_FAULTS", "sigterm@2:0")
    assert run_inprocess(tmp_path / "terminated", smoke_shards) == 0
    assert not _loader_threads()
