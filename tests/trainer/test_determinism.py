"""Deterministic kernels on CUDA (``training.deterministic``): set at a segment's start-up on a
GPU (tested here with CUDA mocked), out of the run's identity, recorded in checkpoints; an
operation without a deterministic kernel stops the run with one line naming it and the key."""

from __future__ import annotations

import os
import warnings
from dataclasses import replace

import pytest
import torch

import trainer.segment as segment_module
from puicl_common.configio import ConfigError
from trainer import hooks
from trainer.config import load_run_config, run_config_from_mapping
from trainer.determinism import (
    CUBLAS_WORKSPACE,
    apply_determinism,
    nondeterministic_op,
    warn_if_not_reproducible,
)
from trainer.dist_env import DistEnv
from trainer.faults import parse_faults
from trainer.segment import TrainArgs

from .conftest import SMOKE, run_inprocess


@pytest.fixture
def restored_mode(monkeypatch: pytest.MonkeyPatch):
    """Strict mode and the cuBLAS variable as they were before the test."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    was = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    yield
    torch.use_deterministic_algorithms(was)
    torch.utils.deterministic.fill_uninitialized_memory = fill


def test_a_cuda_segment_starts_in_strict_deterministic_mode(tmp_path, restored_mode,
                                                            monkeypatch) -> None:
    """A segment on CUDA sets strict mode and the cuBLAS workspace before the model reaches
    the device, and records both the mode and the GPU in its checkpoints; after the segment
    the mode is as before."""
    seen = {}

    def initial_state(config, device):  # the first thing that would put the model on the GPU
        seen["strict"] = torch.are_deterministic_algorithms_enabled()
        seen["warn_only"] = torch.is_deterministic_algorithms_warn_only_enabled()
        seen["workspace"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        seen["fill"] = torch.utils.deterministic.fill_uninitialized_memory
        raise KeyboardInterrupt  # stop before any real CUDA work

    monkeypatch.setattr(segment_module.TrainingState, "initial", staticmethod(initial_state))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Mocked GPU")
    torch.use_deterministic_algorithms(False)
    env = DistEnv(0, 1, 0, torch.device("cuda", 0), None)
    args = TrainArgs(config=SMOKE, shards=tmp_path, run_dir=tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        segment_module.run_segment(args, env)
    assert seen == {"strict": True, "warn_only": False, "workspace": CUBLAS_WORKSPACE,
                    "fill": True}
    # the segment's mode does not outlive it (a notebook's later code runs as before)
    assert not torch.are_deterministic_algorithms_enabled()

    # training.deterministic_fill: false keeps strict mode and drops the fills, for the
    # segment only
    smoke = load_run_config(SMOKE)
    fill_off = replace(smoke, training=replace(smoke.training, deterministic_fill=False))
    monkeypatch.setattr(segment_module, "load_run_config", lambda path: fill_off)
    with pytest.raises(KeyboardInterrupt):
        segment_module.run_segment(args, env)
    assert seen == {"strict": True, "warn_only": False, "workspace": CUBLAS_WORKSPACE,
                    "fill": False}
    assert torch.utils.deterministic.fill_uninitialized_memory

    # off: strict mode is switched off, the variable left alone
    torch.use_deterministic_algorithms(True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    assert apply_determinism(False, torch.device("cuda", 0)) is False
    assert not torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_a_deterministic_workspace_the_user_set_is_kept(restored_mode, monkeypatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    assert apply_determinism(True, torch.device("cuda", 0))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")  # not reproducible: replaced
    apply_determinism(True, torch.device("cuda", 0))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE


def test_cpu_is_left_as_it_is(restored_mode) -> None:
    torch.use_deterministic_algorithms(False)
    assert apply_determinism(True, torch.device("cpu")) is False
    assert not torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_the_key_is_on_by_default_and_out_of_the_runs_identity() -> None:
    config = load_run_config(SMOKE)
    assert config.training.deterministic is True
    for key in ("deterministic", "deterministic_fill"):
        data = {"training": {key: False}}
        assert run_config_from_mapping(data).training_hash() == run_config_from_mapping(
            {}).training_hash(), key
    with pytest.raises(ConfigError, match=r"^training\.deterministic"):
        run_config_from_mapping({"training": {"deterministic": "sometimes"}})


def test_torchs_refusals_are_recognised() -> None:
    try:
        torch.use_deterministic_algorithms(True)
        torch.zeros(2).put_(torch.tensor([0]), torch.ones(1))
    except RuntimeError as err:
        assert nondeterministic_op(err) == "put_"
    else:
        pytest.fail("put_ ran under strict deterministic mode")
    finally:
        torch.use_deterministic_algorithms(False)
    cublas = RuntimeError(
        "Deterministic behavior was enabled with either `torch.use_deterministic_algorithms"
        "(True)` or `at::Context::setDeterministicAlgorithms(true)`, but this operation is not "
        "deterministic because it uses CuBLAS and you have a CUDA version >= 10.2.")
    assert nondeterministic_op(cublas) == "cuBLAS"
    assert nondeterministic_op(RuntimeError("CUDA out of memory")) is None
    assert nondeterministic_op(ValueError("put_ does not have a deterministic implementation")
                               ) is None


def test_an_op_without_a_deterministic_kernel_stops_the_run_in_one_line(
        smoke_shards, tmp_path, capsys, restored_mode) -> None:
    with hooks.installed(parse_faults("nondeterministic@1:0").hook):
        code = run_inprocess(tmp_path / "run", smoke_shards, until_step=3)
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1, err
    assert errors[0].startswith("error: the operation put_ has no deterministic CUDA kernel")
    assert "training.deterministic: false" in errors[0]
    assert not torch.are_deterministic_algorithms_enabled()  # the hook's mode is undone


def test_checkpoints_record_the_mode_and_the_hardware(smoke_shards, tmp_path) -> None:
    from trainer.export import load_run_checkpoint

    was = torch.are_deterministic_algorithms_enabled()
    assert run_inprocess(tmp_path / "run", smoke_shards, until_step=2) == 0
    assert torch.are_deterministic_algorithms_enabled() == was  # the segment's mode is undone
    _, payload = load_run_checkpoint(tmp_path / "run")
    if torch.cuda.is_available():  # the trainer's default device
        assert payload["deterministic"] is True
        assert payload["hardware"] == {"device": torch.cuda.get_device_name(0),
                                       "torch": str(torch.__version__),
                                       "cuda": str(torch.version.cuda)}
    else:
        assert payload["deterministic"] is False  # the CPU's kernels: no mode was set
        # a CPU unit's gradient depends on the thread count (run_inprocess: 1)
        assert payload["hardware"] == {"device": "cpu", "torch": str(torch.__version__),
                                       "threads": "1"}


def test_a_resume_on_other_hardware_warns(tmp_path) -> None:
    payload = {"deterministic": True,
               "hardware": {"device": "NVIDIA H100", "torch": "2.11", "cuda": "13.0"}}
    here = {"device": "NVIDIA H200", "torch": "2.11", "cuda": "13.0"}
    with pytest.warns(UserWarning, match=r"device 'NVIDIA H100' -> 'NVIDIA H200'.*not bit"):
        warn_if_not_reproducible(tmp_path, payload, True, here)
    with pytest.warns(UserWarning, match="deterministic kernels on, with them off"):
        warn_if_not_reproducible(tmp_path, {**payload, "hardware": here},
                                                 False, here)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same: silent
        warn_if_not_reproducible(tmp_path, {**payload, "hardware": here},
                                                 True, here)
        warn_if_not_reproducible(tmp_path, {}, True, here)  # older checkpoint
        # a checkpoint written before the thread count was recorded
        cpu = {"device": "cpu", "torch": "2.11"}
        warn_if_not_reproducible(tmp_path, {"hardware": cpu}, False, {**cpu, "threads": "2"})
    with pytest.warns(UserWarning, match=r"threads '1' -> '2'"):
        warn_if_not_reproducible(tmp_path, {"hardware": {**cpu, "threads": "1"}}, False,
                                 {**cpu, "threads": "2"})


@pytest.mark.parametrize(("recorded", "message"), [
    ({"hardware": "NVIDIA H100"}, r"its 'hardware' is of type str, not a mapping of names"),
    ({"hardware": {"device": 3}}, r"its 'hardware' is a mapping of other values, not a mapping"),
    ({"deterministic": "yes"}, r"its 'deterministic' is of type str, not true or false"),
    ({"deterministic": [1]}, r"its 'deterministic' is of type list, not true or false"),
    ({"deterministic": 1}, r"its 'deterministic' is of type int, not true or false"),
])
def test_a_checkpoint_recording_its_hardware_in_another_type_is_refused(
        tmp_path, recorded, message) -> None:
    here = {"device": "cpu", "torch": "2.11"}
    with pytest.raises(TypeError, match=message):
        warn_if_not_reproducible(tmp_path, recorded, True, here)
