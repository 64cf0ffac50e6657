"""Shared fixtures of the trainer tests: smoke-config shards made by the real prior-gen, and
helpers to run the real trainer in-process or as subprocesses (python / torchrun)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from prior_gen.cli import main as prior_gen_main
from trainer.export import load_run_checkpoint
from trainer.train import TrainArgs, train

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "smoke.yaml"
PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def generate(out: Path, *args: str) -> None:
    code = prior_gen_main(["--config", str(SMOKE), "--workers", "1", "--out", str(out), *args])
    assert code in (0, None)


@pytest.fixture(scope="session")
def smoke_shards(tmp_path_factory) -> Path:
    """The smoke config's whole train split and its validation steps (stages 1, 3, tail)."""
    out = tmp_path_factory.mktemp("shards") / "smoke"
    generate(out, "--stages", "all")
    generate(out, "--split", "val", "--stages", "1,3,tail", "--steps", "0-1")
    return out


@pytest.fixture(scope="session")
def smoke_ddp(tmp_path_factory) -> Path:
    """The smoke config with the DDP step (``training.gradient_sum: all_reduce``, the legacy
    value) in place of its unit step."""
    path = tmp_path_factory.mktemp("configs") / "smoke_ddp.yaml"
    path.write_text(f"extends: {SMOKE}\n"
                    "training: {gradient_sum: all_reduce, step_units: null}\n")
    return path


def run_inprocess(run_dir: Path, shards: Path, config: Path = SMOKE, **options) -> int:
    """One training segment in this process (world size 1, one torch thread like the
    subprocess runs, so that results compare bit for bit); returns the exit code."""
    threads = torch.get_num_threads()
    try:
        return train(
            TrainArgs(config=config, shards=shards, run_dir=run_dir, threads=1, **options)
        )
    finally:
        torch.set_num_threads(threads)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_subprocess(
    run_dir: Path, shards: Path, *extra: str, nproc: int = 1, faults: str | None = None,
    config: Path = SMOKE, timeout: float = 180,
) -> subprocess.CompletedProcess:
    """``python trainer/main.py`` (nproc=1) or ``torchrun --nproc_per_node N trainer/main.py``."""
    script = [str(ROOT / "trainer" / "main.py"), "--config", str(config), "--shards",
              str(shards), "--run-dir", str(run_dir), "--threads", "1", *extra]
    if nproc == 1:
        command = [PYTHON, *script]
    else:
        command = [TORCHRUN, "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
                   "--master_port", str(free_port()), *script]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PUICL_TRAINER_FAULTS", None)
    if faults:
        env["PUICL_TRAINER_FAULTS"] = faults
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def state_hash(run_dir: Path, step: int | None = None) -> str:
    """sha256 over the model, EMA and optimizer tensors of a run's checkpoint."""
    _, payload = load_run_checkpoint(run_dir, step)
    digest = hashlib.sha256()
    for part in ("model", "ema"):
        for name, tensor in sorted(payload[part].items()):
            digest.update(name.encode())
            digest.update(tensor.numpy().tobytes())
    for index, state in sorted(payload["optimizer"]["state"].items()):
        for key, tensor in sorted(state.items()):
            digest.update(f"{index}.{key}".encode())
            digest.update(torch.as_tensor(tensor).numpy().tobytes())
    return digest.hexdigest()


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target
