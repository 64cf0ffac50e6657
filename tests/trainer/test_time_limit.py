"""``--time-limit``: the budget's decision, and time-limited segments that continue a run bit for
bit. The clock is the fake one of ``trainer.faults`` (each step takes exactly S seconds,
nothing else takes time), so where a segment stops is decided, not raced."""

from __future__ import annotations

import pytest

from trainer.export import load_run_checkpoint
from trainer.faults import CLOCK_ENV_VAR, FakeStepClock, parse_fake_clock
from trainer.main import main as trainer_main
from trainer.metrics_log import read_metrics
from trainer.time_limit import UNMEASURED_CHECKPOINT_S, MonotonicClock, TimeBudget

from .conftest import SMOKE, run_inprocess, run_subprocess, state_hash


def test_budget_keeps_room_for_the_next_step_the_loops_work_and_a_checkpoint() -> None:
    clock = FakeStepClock(60.0)
    budget = TimeBudget(600.0, clock)
    assert budget.margin_s == 30.0  # the floor: 2 % of 10 min is less
    assert budget.checkpoint_estimate() == UNMEASURED_CHECKPOINT_S == 30.0
    for _ in range(7):
        clock.step_started()
        budget.record_step(60.0)
    # 420 s used: next step 60 + final checkpoint 30 + margin 30 = 540 <= 600
    assert not budget.must_stop(validations=0, checkpoints=0, validation_steps=6)
    # a cadence checkpoint on the way: 570; an unmeasured validation counts as 6 steps: 900
    assert not budget.must_stop(validations=0, checkpoints=1, validation_steps=6)
    assert budget.must_stop(validations=1, checkpoints=0, validation_steps=6)
    # once measured, the measurements count: a validation of 10 s, checkpoints of 2 s
    budget.record_validation(10.0)
    budget.record_checkpoint(2.0)
    budget.record_checkpoint(1.0)  # the longest so far stands
    assert budget.checkpoint_estimate() == 2.0
    assert not budget.must_stop(validations=1, checkpoints=1, validation_steps=6)  # 524
    clock.step_started()  # 480 s used: 480 + 60 + 10 + 2 + 2 + 30 = 584 <= 600
    assert not budget.must_stop(validations=1, checkpoints=1, validation_steps=6)
    budget.record_step(75.0)  # a longer step raises the estimate: 599 still fits ...
    assert not budget.must_stop(validations=1, checkpoints=1, validation_steps=6)
    budget.record_step(77.0)  # ... and one longer still does not fit: 601 > 600
    assert budget.must_stop(validations=1, checkpoints=1, validation_steps=6)


def test_budget_counts_from_the_given_origin_and_has_a_proportional_margin() -> None:
    clock = FakeStepClock(1.0)
    for _ in range(100):
        clock.step_started()
    budget = TimeBudget(4 * 3600.0, clock, origin=40.0)
    assert budget.elapsed() == 60.0
    assert budget.margin_s == pytest.approx(0.02 * 4 * 3600)  # 288 s for a 4-hour job
    with pytest.raises(ValueError, match="must be positive"):
        TimeBudget(0.0, clock)


def test_fake_clock_from_the_environment_value() -> None:
    assert isinstance(parse_fake_clock(None, 0), MonotonicClock)
    assert isinstance(parse_fake_clock("", 3), MonotonicClock)
    assert parse_fake_clock("60", 5).seconds_per_step == 60.0
    assert parse_fake_clock("60,120.5", 1).seconds_per_step == 120.5
    for bad in ("soon", "0", "-1", "60,"):
        with pytest.raises(ValueError, match=CLOCK_ENV_VAR):
            parse_fake_clock(bad, 0)
    with pytest.raises(ValueError, match="no value for rank 2"):
        parse_fake_clock("60,120", 2)


def test_time_limit_must_be_positive(smoke_shards, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        trainer_main(["--config", str(SMOKE), "--shards", str(smoke_shards),
                      "--run-dir", str(tmp_path / "run"), "--time-limit", "0"])
    assert exit_info.value.code == 2
    assert "--time-limit must be positive minutes, got 0.0" in capsys.readouterr().err


@pytest.fixture(scope="module")
def reference_run(smoke_shards, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "reference"
    assert run_inprocess(run_dir, smoke_shards) == 0
    return run_dir


def test_time_limited_segments_continue_the_run_bit_for_bit(
    reference_run, smoke_shards, tmp_path, monkeypatch
) -> None:
    # Smoke: 16 steps, validation and checkpoint every 4; 48 validation tasks = 6 steps' worth.
    # 60 s per step, 13 min = 780 s, margin 30 s. Asked during step index k (elapsed (k+1)*60):
    # k=3 needs 240 + 60 + 360 (validation after step 4, not yet measured: 6 steps) + 2*30
    # (checkpoint after step 4 and the final one, not yet measured) + 30 = 750 <= 780: go on.
    # After step 4 validation and checkpoint are measured (0 s on this clock); then
    # k=11 needs 720 + 60 + 0 + 0 + 30 = 810 > 780: step 12 is the segment's last.
    monkeypatch.setenv(CLOCK_ENV_VAR, "60")
    run_dir = tmp_path / "timed"
    first = run_subprocess(run_dir, smoke_shards, "--time-limit", "13")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "time limit: checkpoint written at step 12" in first.stderr
    assert load_run_checkpoint(run_dir)[1]["step"] == 12
    events = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("event") == "stopped"]
    assert events == [{"kind": "event", "event": "stopped", "step": 12, "reason": "time limit"}]

    # the second segment, in-process, is under the same limit and fits: 12 -> 16
    assert run_inprocess(run_dir, smoke_shards, time_limit_s=13 * 60.0) == 0
    assert load_run_checkpoint(run_dir)[1]["step"] == 16
    assert state_hash(run_dir) == state_hash(reference_run)


@pytest.mark.slow  # a torchrun job of two processes
def test_the_slowest_rank_stops_every_rank(smoke_shards, tmp_path, monkeypatch) -> None:
    # rank 0 alone would stop at step 12 (test above); rank 1's steps take 120 s:
    # k=2 needs 360 + 120 + 6*120 (validation after step 4, unmeasured) + 30 + 30 > 780,
    # so rank 1 asks to stop after step 3, and the all-reduce stops rank 0 there too
    monkeypatch.setenv(CLOCK_ENV_VAR, "60,120")
    two = run_subprocess(tmp_path / "two", smoke_shards, "--time-limit", "13", nproc=2)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "time limit: checkpoint written at step 3" in two.stderr
    assert load_run_checkpoint(tmp_path / "two")[1]["step"] == 3
    train_steps = [r["step"] for r in read_metrics(tmp_path / "two" / "metrics.jsonl")
                   if r["kind"] == "train"]
    assert train_steps == [1, 2, 3]
