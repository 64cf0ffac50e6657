"""The unit step (``training.gradient_sum: units``, trainer.units): the same bits on any number
of processes.

The cut of a step into units and their ranks; the gathered units' sum against one process's,
bit for bit; the padded shapes against the specification; the config's rules; and, as a user
runs it, the smoke config trained by 1, 2 and 4 processes and resumed on another world size,
ending with the same checkpoints and the same exported bytes."""

from __future__ import annotations

import os
import subprocess
import warnings

import numpy as np
import pytest
import torch

from puicl_common.configio import ConfigError
from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.specification import PUICLSpecification
from trainer.batching import MicroBatch
from trainer.cli import main as trainer_cli
from trainer.config import load_run_config, run_config_from_mapping
from trainer.loss import masked_task_loss, per_task_loss
from trainer.units import UnitPlan, padded_size, sum_in_unit_order

from .conftest import (
    PYTHON,
    ROOT,
    SMOKE,
    TORCHRUN,
    free_port,
    run_inprocess,
    run_subprocess,
    state_hash,
)

WORKER = ROOT / "tests" / "trainer" / "unit_sum_worker.py"


# ---------------------------------------------------------------------------- the plan


def test_units_are_cut_by_row_count_and_dealt_to_the_ranks_in_turn() -> None:
    rows = [50, 10, 40, 10, 30, 20, 60, 5]
    plan = UnitPlan(global_batch=8, units=4, world_size=2, rank=1)
    # ordered by rows, ties by index: 7, 1, 3, 5, 4, 2, 0, 6
    assert plan.unit_tasks(rows) == [[7, 1], [3, 5], [4, 2], [0, 6]]
    assert plan.local_units == [1, 3]
    assert UnitPlan(8, 4, 2, 0).local_units == [0, 2]
    assert UnitPlan(8, 4, 4, 3).local_units == [3]
    assert plan.gathered_order() == [0, 2, 1, 3]  # rank 0's units, then rank 1's
    # the cut is the config's and the data's: the same for every world size
    assert all(UnitPlan(8, 4, w, 0).unit_tasks(rows) == plan.unit_tasks(rows) for w in (1, 4))


def test_a_world_size_that_does_not_divide_the_units_is_refused() -> None:
    with pytest.raises(ValueError, match=r"4 units .* over 3 processes; use 1, 2, 4 processes"):
        UnitPlan(8, 4, 3, 0)


def test_padded_sizes_take_the_smallest_shape_that_holds_the_tasks() -> None:
    assert [padded_size(v, (8, 12, 20)) for v in (1, 8, 9, 20)] == [8, 8, 12, 20]
    assert padded_size(41, (8, 12, 20)) == 60  # beyond the last: multiples of it


def test_the_sum_in_unit_order_is_one_fixed_order_of_additions() -> None:
    rows = torch.randn(4, 10_000, generator=torch.Generator().manual_seed(2))
    expected = ((rows[0] + rows[1]) + rows[2]) + rows[3]
    assert torch.equal(sum_in_unit_order(rows), expected)
    # another order gives other bits: the order is what the exchange must keep
    assert not torch.equal(expected, (rows[0] + rows[1]) + (rows[2] + rows[3]))


@pytest.mark.slow  # a torchrun job of two processes
def test_two_processes_sum_the_units_to_the_bytes_of_one_process(tmp_path) -> None:
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    env_free = {"OMP_NUM_THREADS": "1"}
    done = subprocess.run([PYTHON, str(WORKER), str(one)], capture_output=True, text=True,
                          cwd=ROOT, env={**_environ(), **env_free}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(
        [TORCHRUN, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
         str(free_port()), str(WORKER), str(two)],
        capture_output=True, text=True, cwd=ROOT, env={**_environ(), **env_free}, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    alone, shared = torch.load(one), torch.load(two)
    assert alone["rows"].abs().max() > 0
    # every unit's gradient is the same bytes whichever process computed it, so is the sum
    assert torch.equal(alone["rows"], shared["rows"])
    assert torch.equal(alone["sum"], shared["sum"])


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PUICL_TRAINER_FAULTS"}


# ---------------------------------------------------------------------------- padded shapes

CONFIG = ModelConfig(embed_dim=32, num_layers=2, num_heads=2, ff_dim=48)


def _tasks(seed: int) -> list:
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    made = []
    for labeled, unlabeled, features in [(7, 13, 3), (12, 5, 6), (4, 20, 2), (30, 31, 6)]:
        x = rng.normal(size=(labeled + unlabeled, features)).astype(np.float32)
        x[labeled:] += rng.normal(size=features).astype(np.float32)
        y = np.ones(labeled + unlabeled, dtype=np.int8)
        y[labeled:] = rng.integers(0, 2, size=unlabeled)
        made.append(SimpleNamespace(x=x, y=y, n_labeled=labeled))
    return made


def _loss_and_gradients(model, micro: MicroBatch, loss):
    model.zero_grad(set_to_none=True)
    losses = loss(model(micro.batch), micro)
    losses.sum().backward()
    return losses.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_a_padded_shape_computes_the_unpadded_tasks() -> None:
    """Each task keeps its rows and features in a shape padded far beyond them: the padded
    layout's per-task losses and gradients are the specification's on the unpadded batch."""
    torch.manual_seed(4)
    model = PUICLModel(CONFIG, attention="padded")
    with torch.no_grad():
        for parameter in model.decoder.parameters():
            parameter.mul_(3.0)
    spec = PUICLSpecification(CONFIG)
    spec.load_state_dict(model.state_dict())
    tasks = _tasks(0)
    plain = MicroBatch.collate(tasks)
    padded = MicroBatch.collate(tasks, (128, 16))
    assert tuple(padded.batch.x.shape) == (4, 128, 16)
    assert padded.batch.sizes() == plain.batch.sizes()  # each task its own sizes

    expected, expected_grads = _loss_and_gradients(
        spec, plain, lambda logits, m: per_task_loss(logits, m.targets, m.unlabeled, m.index))
    got, got_grads = _loss_and_gradients(
        model, padded, lambda logits, m: masked_task_loss(logits, m.targets, m.unlabeled))
    assert expected.std() > 1e-3  # the tasks' losses differ: the comparison is not vacuous
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    for name, grad in expected_grads.items():
        assert grad.abs().max() > 0, name
        error = (got_grads[name] - grad).abs().max() / grad.abs().max()
        assert error <= 1e-4, (name, float(error))


def test_the_masked_loss_is_the_indexed_loss_and_keeps_non_finite_padding_out() -> None:
    micro = MicroBatch.collate(_tasks(1), (64, 8))
    logits = torch.randn(4, 64, 2, generator=torch.Generator().manual_seed(3))
    logits[~micro.unlabeled] = float("nan")  # labeled and padded rows: never read
    logits.requires_grad_()
    expected = per_task_loss(logits, micro.targets, micro.unlabeled, micro.index)
    got = masked_task_loss(logits, micro.targets, micro.unlabeled)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)
    got.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert (logits.grad[~micro.unlabeled] == 0).all()


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _unit_training(graphs: str):
    from trainer.config import TrainingConfig, UnitShapes

    return TrainingConfig(gradient_sum="units", step_units=4, unit_graphs=graphs,
                          unit_shapes=UnitShapes(rows=(64,), features=(8,)))


def test_cuda_graphs_are_refused_off_cuda() -> None:
    from trainer.unit_graphs import UnitForward

    model = PUICLModel(CONFIG, attention="padded")
    with pytest.raises(ValueError, match="cuda_graphs needs a CUDA device"):
        UnitForward(model, model, _unit_training("cuda_graphs"), torch.device("cpu"))


@CUDA
def test_a_captured_shape_replays_the_eager_unit() -> None:
    """One CUDA graph per padded shape, forward and backward, replayed on other tasks of that
    shape: the eager padded step's losses and gradients (the precision's autocast included)."""
    from trainer.unit_graphs import UnitForward

    device = torch.device("cuda")
    torch.manual_seed(4)
    model = PUICLModel(CONFIG, attention="padded").to(device)
    eager = UnitForward(model, model, _unit_training("none"), device)
    graphs = UnitForward(model, model, _unit_training("cuda_graphs"), device)
    for seed in (0, 1):  # the capture, then a replay on other tasks of the same shape
        micro = MicroBatch.collate(_tasks(seed), (64, 8)).to(device)
        results = []
        for forward in (eager, graphs):
            model.zero_grad(set_to_none=True)
            losses = forward(micro)
            losses.sum().backward()
            results.append((losses.detach().clone(),
                            {n: p.grad.clone() for n, p in model.named_parameters()}))
        (expected, expected_grads), (got, got_grads) = results
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-3)
        for name, grad in expected_grads.items():
            error = (got_grads[name] - grad).abs().max() / grad.abs().max()
            assert error <= 1e-2, (name, float(error))
    assert graphs.shapes == 1


# ---------------------------------------------------------------------------- the config


def _config(training: dict, **sections):
    return run_config_from_mapping({"validation": {"stages": [1]}, "training": training,
                                    **sections})


@pytest.mark.parametrize(("training", "key", "message"), [
    ({"gradient_sum": "units"}, "training.step_units", "needs the number of units"),
    ({"gradient_sum": "units", "step_units": 5}, "training.step_units",
     "do not split the global batch of 48"),
    ({"step_units": 4}, "training.step_units", "belongs to the unit step"),
    ({"unit_graphs": "compile"}, "training.unit_graphs", "belongs to the unit step"),
    ({"gradient_sum": "units", "step_units": 4, "unit_graphs": "compile"},
     "training.unit_graphs", "needs fixed shapes"),
    ({"gradient_sum": "units", "step_units": 4, "unit_shapes": {"features": [8, 12]}},
     "training.unit_shapes.features", "holds 12 features, the tasks up to 20"),
    ({"gradient_sum": "units", "step_units": 4, "unit_shapes": {"rows": [64, 32]}},
     "training.unit_shapes.rows", "increasing"),
])
def test_the_unit_keys_are_checked_naming_the_key(training, key, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        _config(training)
    assert str(err.value).startswith(f"{key}:")


def test_a_world_size_the_units_do_not_split_is_refused_at_start(tmp_path) -> None:
    from trainer.dist_env import DistEnv
    from trainer.segment import Segment, TrainArgs

    args = TrainArgs(config=SMOKE, shards=tmp_path, run_dir=tmp_path / "run")
    three = DistEnv(0, 3, 0, torch.device("cpu"), None)
    with pytest.raises(ConfigError, match=r"^training\.step_units: the step's 4 units .* "
                                          r"use 1, 2, 4 processes$"):
        Segment(args, load_run_config(SMOKE), three)


# ---------------------------------------------------------------------------- as a user runs it


@pytest.fixture(scope="module")
def one_process(smoke_shards, tmp_path_factory):
    """The smoke config trained by one process, one thread (what the others must equal)."""
    run = tmp_path_factory.mktemp("units") / "one"
    assert run_inprocess(run, smoke_shards) == 0
    return run


def _export(run, out) -> bytes:
    assert trainer_cli(["export", str(run), "--out", str(out)]) in (0, None)
    return (out / "model.safetensors").read_bytes()


@pytest.mark.slow  # torchrun jobs of 2 and 4 processes
def test_one_two_and_four_processes_train_the_same_bits(smoke_shards, one_process,
                                                         tmp_path) -> None:
    assert load_run_config(SMOKE).training.gradient_sum == "units"
    for n in (2, 4):
        result = run_subprocess(tmp_path / f"n{n}", smoke_shards, nproc=n)
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"{n} process(es) on cpu" in result.stderr
        assert "float rounding" not in result.stderr
    reference = state_hash(one_process)
    assert state_hash(tmp_path / "n2") == reference
    assert state_hash(tmp_path / "n4") == reference
    weights = _export(one_process, tmp_path / "w1")
    assert _export(tmp_path / "n2", tmp_path / "w2") == weights
    assert _export(tmp_path / "n4", tmp_path / "w4") == weights
    # the run moved: an untrained model's checkpoint would not be this one
    assert state_hash(one_process, 8) != reference


@pytest.mark.slow  # torchrun jobs
def test_a_resume_on_another_world_size_continues_to_the_same_bits(smoke_shards, one_process,
                                                                   tmp_path) -> None:
    # 4 processes to step 6, then 1 process (no warning: the same bits), to the end
    first = run_subprocess(tmp_path / "moved", smoke_shards, "--until-step", "6", nproc=4)
    assert first.returncode == 0, first.stderr[-3000:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_inprocess(tmp_path / "moved", smoke_shards, until_step=11) == 0
    assert not [w for w in caught if "float rounding" in str(w.message)]
    third = run_subprocess(tmp_path / "moved", smoke_shards, nproc=2)
    assert third.returncode == 0, third.stderr[-3000:]
    assert state_hash(tmp_path / "moved") == state_hash(one_process)
    assert _export(tmp_path / "moved", tmp_path / "wm") == _export(one_process, tmp_path / "w1")


def test_the_compiled_padded_step_is_one_graph_per_shape(smoke_shards, tmp_path,
                                                           monkeypatch) -> None:
    """``unit_graphs: compile`` traces each padded shape whole (``fullgraph``: no break) and
    trains the eager step's bits. Dynamo and AOT autograd are checked here with their eager
    backend; inductor's kernels, which change rounding only, need a C++ build of minutes on
    CPU and are measured by speed/gpu_check.sh."""
    config = tmp_path / "padded.yaml"
    config.write_text(f"extends: {SMOKE}\ntraining: {{unit_shapes: {{rows: [64, 128], "
                      "features: [8]}}\n")
    compiled = tmp_path / "compiled.yaml"
    compiled.write_text(f"extends: {config}\ntraining: {{unit_graphs: compile}}\n")
    assert run_inprocess(tmp_path / "eager", smoke_shards, config, until_step=3) == 0
    calls = []
    real = torch.compile

    def eager_backend(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **{**kwargs, "backend": "aot_eager"})

    monkeypatch.setattr(torch, "compile", eager_backend)
    assert run_inprocess(tmp_path / "compiled", smoke_shards, compiled, until_step=3) == 0
    assert calls == [{"dynamic": False, "fullgraph": True}]
    assert state_hash(tmp_path / "compiled") == state_hash(tmp_path / "eager")

