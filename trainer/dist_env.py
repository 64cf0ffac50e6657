"""Process-group setup from the torchrun environment, and the few collectives the loop needs.

``torchrun`` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; a plain
``python trainer/main.py`` sets none of them and runs as world size 1 without a process group.
The backend is NCCL when the device is a GPU and gloo on CPU, unless asked for by name: gloo on
GPUs lets several processes share one GPU (NCCL refuses two ranks on one device), as the GPU
check's one-against-two-processes comparison does. Collectives time out (default 10 minutes)
instead of hanging forever if a peer dies.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from puicl_common.runtime import resolve_device


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None: single process, no process group

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.backend is not None


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"environment variable {name}={value!r} is not an integer") from None


def init_distributed(device_preference: str = "auto", timeout_minutes: float = 10.0,
                     backend: str | None = None) -> DistEnv:
    """Join the torchrun job described by the environment (or run alone); ``backend``
    ("gloo" or "nccl") overrides the device's default."""
    if backend not in (None, "gloo", "nccl"):
        raise ValueError(f"the process group's backend must be gloo or nccl, got {backend!r}")
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    device = resolve_device(device_preference, local_rank)
    if world_size == 1:
        return DistEnv(0, 1, 0, device, None)
    if backend is None:
        backend = "nccl" if device.type == "cuda" else "gloo"
    elif backend == "nccl" and device.type != "cuda":
        raise ValueError(f"the nccl backend needs a GPU, and this process runs on {device}")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(minutes=timeout_minutes),
            device_id=device if backend == "nccl" else None,
        )
    return DistEnv(rank, world_size, local_rank, device, backend)


def all_reduce_sum(tensor: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """Sum ``tensor`` over ranks, in place (no-op alone). The tensor must be on env.device."""
    if env.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier(env: DistEnv) -> None:
    if env.distributed:
        if env.backend == "nccl":
            dist.barrier(device_ids=[env.device.index])
        else:
            dist.barrier()


def shutdown(env: DistEnv) -> None:
    if env.distributed and dist.is_initialized():
        dist.destroy_process_group()
