"""The DDP step (``training.gradient_sum: all_reduce``): two gloo processes (torchrun) against
one process with gradient accumulation, and the all-ranks-skip path when only one rank sees a
non-finite loss. The unit step's world sizes: tests/trainer/test_units.py."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config import load_run_config
from trainer.export import load_run_checkpoint
from trainer.metrics_log import read_metrics
from trainer.state import init_model

from .conftest import SMOKE, run_inprocess, run_subprocess, state_hash

pytestmark = pytest.mark.slow  # four torchrun jobs of two processes: ~40 s on 2 cores


def _flat(state: dict) -> torch.Tensor:
    return torch.cat([tensor.flatten() for _, tensor in sorted(state.items())])


def _assert_close_runs(a, b, weights_rel: float = 1e-3, weights_max: float = 5e-5) -> None:
    """Same training up to float rounding: per-step loss and gradient norm (the norm catches a
    wrong loss scale, to which Adam's weights would be blind) and the final weights."""
    def series(run, key):
        records = read_metrics(run / "metrics.jsonl")
        # a window whose only step was skipped logs null
        return [math.nan if r[key] is None else r[key] for r in records if r["kind"] == "train"]

    assert series(b, "loss") == pytest.approx(series(a, "loss"), rel=1e-5, nan_ok=True)
    assert series(b, "grad_norm") == pytest.approx(series(a, "grad_norm"), rel=1e-4, nan_ok=True)
    _, one = load_run_checkpoint(a)
    _, two = load_run_checkpoint(b)
    assert one["step"] == two["step"] == 16
    initial = init_model(load_run_config(SMOKE), torch.device("cpu")).state_dict()
    for part in ("model", "ema"):
        moved = (_flat(one[part]) - _flat(initial)).norm()
        differ = _flat(two[part]) - _flat(one[part])
        # Adam turns a rounding difference of a near-zero gradient component into up to ~lr
        # per step in that weight, so compare the runs relative to how far training moved
        # the weights (measured: ~5e-5), and bound single weights by 5% of the peak lr
        assert differ.norm() <= weights_rel * moved
        assert differ.abs().max() <= weights_max


def test_two_gloo_processes_match_one_process(smoke_shards, smoke_ddp, tmp_path) -> None:
    # one process: 8 tasks per step in 2 micro-batches of 4 (smoke micro_batch_size: 4);
    # two processes: 4 tasks each, one micro-batch, gradients averaged by DDP
    assert run_inprocess(tmp_path / "one", smoke_shards, config=smoke_ddp) == 0
    # the job is also interrupted: SIGTERM reaches rank 1 only, at step index 6; the stop
    # request travels in the step's all-reduce, so both ranks stop after that step
    two = run_subprocess(tmp_path / "two", smoke_shards, nproc=2, faults="sigterm@6:1",
                         config=smoke_ddp)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "2 process(es) on cpu" in two.stderr
    assert "stop requested: checkpoint written at step 7" in two.stderr
    assert load_run_checkpoint(tmp_path / "two")[1]["step"] == 7
    resumed = run_subprocess(tmp_path / "two", smoke_shards, nproc=2, config=smoke_ddp)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_close_runs(tmp_path / "one", tmp_path / "two")
    # weights differ from an untrained model's by far more than the tolerance
    _, payload = load_run_checkpoint(tmp_path / "two", 8)
    assert not torch.allclose(payload["model"]["decoder.2.weight"],
                              load_run_checkpoint(tmp_path / "two")[1]["model"]["decoder.2.weight"])


@pytest.mark.parametrize("step", ["ddp", "units"])
def test_one_rank_nonfinite_skips_on_every_rank(smoke_shards, smoke_ddp, tmp_path, monkeypatch,
                                                step) -> None:
    # step index 2: rank 1 alone has a NaN loss with finite gradients (only the all-reduced
    # flag can stop rank 0); step index 5: rank 0 alone has NaN gradients
    config = smoke_ddp if step == "ddp" else SMOKE
    two = run_subprocess(
        tmp_path / "two", smoke_shards, nproc=2, faults="nonfinite_loss@2:1,nonfinite_grad@5:0",
        config=config,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    skipped = [r["step"] for r in read_metrics(tmp_path / "two" / "metrics.jsonl")
               if r.get("event") == "skipped"]
    assert skipped == [3, 6]
    # the same steps skipped in one process give the same run: the skip was global
    monkeypatch.setenv("PUICL_TRAINER_FAULTS", "nonfinite_grad@2:0,nonfinite_grad@5:0")
    assert run_inprocess(tmp_path / "one", smoke_shards, config=config) == 0
    if step == "ddp":
        _assert_close_runs(tmp_path / "one", tmp_path / "two")
    else:  # the unit step: the same bits
        assert state_hash(tmp_path / "one") == state_hash(tmp_path / "two")


def test_divergence_stops_every_rank_without_hanging(smoke_shards, smoke_ddp, tmp_path) -> None:
    # max_consecutive_skips: 3, the non-finite losses alternate between the ranks
    result = run_subprocess(
        tmp_path / "two", smoke_shards, nproc=2, timeout=120,
        faults="nonfinite_loss@2:1,nonfinite_loss@3:0,nonfinite_loss@4:1", config=smoke_ddp,
    )
    assert result.returncode != 0
    assert "stopped: 3 consecutive steps had a non-finite loss or gradient" in result.stderr
    # exit code 3 = stopped on purpose (torchrun reports the first rank to exit and ends the
    # other); the job ended long before the 120 s timeout, so no rank hung in a collective
    assert "exitcode  : 3" in result.stderr


def test_device_choice_on_a_machine_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.dist_env import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto", local_rank=1) == torch.device("cpu")
    assert resolve_device("cpu", local_rank=0) == torch.device("cpu")
    with pytest.raises(ValueError, match="device 'cuda' was asked for but torch sees no GPU"):
        resolve_device("cuda", local_rank=0)
    with pytest.raises(ValueError, match=r"device must be 'auto' or 'cpu', got 'gpu'"):
        resolve_device("gpu", local_rank=0)


def test_each_rank_takes_its_own_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.dist_env import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert resolve_device("auto", local_rank=2) == torch.device("cuda", 2)
    assert resolve_device("cuda", local_rank=5) == torch.device("cuda", 1)  # wraps around
