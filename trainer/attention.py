"""The run's attention backend: chosen when the run starts, kept for the whole run.

Backends differ in float rounding, so a resumed run must train with the backend its
checkpoints recorded; ``auto`` is resolved once, on rank 0 (it may time the CPU kernel), and
its choice is shared with every rank.
"""

from __future__ import annotations

import torch

from puicl_common.configio import ConfigError
from puicl_model.net.backends import BACKENDS, resolve_backend
from trainer.config import RunConfig
from trainer.dist_env import DistEnv, all_reduce_sum


def choose_attention(config: RunConfig, env: DistEnv, recorded: str | None) -> str:
    """The run's attention backend: the one its checkpoints recorded, else the config's,
    resolved on rank 0 (``auto`` may time the CPU kernel; a new run with
    ``training.unit_shapes`` takes ``padded``) and shared with every rank."""
    asked = config.training.attention
    if recorded is not None:
        if asked not in ("auto", recorded):
            raise ConfigError(
                "training.attention",
                f"this run trains with the attention backend {recorded!r} (recorded in its "
                f"checkpoints); the config asks for {asked!r}. Backends differ in float "
                "rounding, so a run keeps its backend: set 'auto' or "
                f"{recorded!r}, or start a new --run-dir",
            )
        name = recorded
    else:
        if asked == "auto" and config.training.unit_shapes is not None:
            asked = "padded"  # the layout of the padded shapes (trainer.units)
        name = resolve_backend(asked, env.device, training=True) if env.is_main else ""
    if env.distributed:  # rank 0's choice, for every rank
        index = torch.tensor([BACKENDS.index(name) if env.is_main else 0], device=env.device)
        name = BACKENDS[int(all_reduce_sum(index, env)[0])]
    if name == "cpu_kernel":
        resolve_backend(name, env.device, training=True)  # builds (or loads) it on this rank
    graphs = config.training.unit_graphs
    if graphs != "none" and name != "padded":
        raise ConfigError(
            "training.unit_graphs",
            f"{graphs} runs the padded layout, and this run trains with the attention backend "
            f"{name!r}; set training.attention: padded in a new --run-dir, or unit_graphs: none",
        )
    return name
