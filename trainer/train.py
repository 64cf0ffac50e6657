"""Entry point of ``trainer/main.py``: one process's part of a training segment, as an exit code.

Sets up the process group, installs the test hooks that ``PUICL_TRAINER_FAULTS`` asks for
(``trainer.faults``; normal runs leave it unset), trains the segment (``trainer.segment``) and
turns the problems a user can fix into one line and an exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time

from prior_gen.shards.errors import ShardError
from puicl_common.configio import ConfigError
from puicl_common.output_paths import os_error_message
from trainer import hooks
from trainer.checkpoint import CheckpointError
from trainer.determinism import nondeterministic_op, nondeterministic_op_message
from trainer.dist_env import barrier, init_distributed, shutdown
from trainer.faults import faults_from_env
from trainer.segment import TrainArgs, TrainingStopped, run_segment
from trainer.shard_check import ShardPlanError

__all__ = ["TrainArgs", "train"]


def train(args: TrainArgs) -> int:
    """Train one segment in this process.

    Returns the process exit code: 0 done, 2 configuration or data problem (or an operation
    without a deterministic kernel under ``training.deterministic``), 3 stopped after too many
    non-finite steps.
    """
    if args.started_at is None:
        args = dataclasses.replace(args, started_at=time.monotonic())
    try:
        env = init_distributed(args.device, backend=args.dist_backend)
    except ValueError as err:  # e.g. --device cuda on a machine without a GPU
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    try:
        faults = faults_from_env()
        # only when asked: a hook a test installed itself stays in place otherwise
        with hooks.installed(faults.hook) if faults.points else contextlib.nullcontext():
            run_segment(args, env)
        # every rank past its last collective before any rank tears the group down, so that
        # no rank is still in an operation on the group when a peer closes its connections
        barrier(env)
        return 0
    except (ConfigError, ShardPlanError, ShardError, CheckpointError) as err:
        # every rank meets the same config/plan problems: rank 0 reports them; a damaged
        # shard may be in one rank's slice only, so that rank reports it itself
        if env.is_main:
            print(f"error: {err}", file=sys.stderr, flush=True)
        elif isinstance(err, ShardError):
            print(f"error (rank {env.rank}): {err}", file=sys.stderr, flush=True)
        return 2
    except TrainingStopped as err:
        if env.is_main:
            print(f"stopped: {err}", file=sys.stderr, flush=True)
        return 3
    except RuntimeError as err:
        op = nondeterministic_op(err)
        if op is None:
            raise
        # every rank runs the same operations, so every rank stops here: rank 0 reports
        if env.is_main:
            print(f"error: {nondeterministic_op_message(op)}", file=sys.stderr, flush=True)
        return 2
    except OSError as err:
        # the file system refused a write or read (a full disk under metrics.jsonl, a
        # read-only run directory): on whichever rank it happened
        where = "" if env.is_main else f" (rank {env.rank})"
        print(f"error{where}: {os_error_message(err)}", file=sys.stderr, flush=True)
        return 2
    finally:
        # what still holds the process group (the DDP wrapper) through a reference cycle is
        # freed now, while the interpreter is whole, not by its exit
        gc.collect()
        shutdown(env)
