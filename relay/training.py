"""The trainer, called in this process once per piece of a segment, and the arithmetic of when
each piece must end.

A segment trains in pieces: the replay of the previous segment's last steps, chunks of new
steps (each started once its shards are written, so that generation overlaps training), and
the last ``replay_steps`` steps after the committed one. Each piece is one call of
``trainer.train.train`` on the same run directory: it resumes the newest checkpoint and ends
with one, which continues a run bit for bit (docs/training.md §3). In one process the CUDA
context, the imports and the kernels' caches are paid once.

The trainer's own time limit (``--time-limit``) is the backstop of every piece: the relay
plans a piece's steps from the speed measured so far, and passes the trainer a limit at which
it would end by the relay's deadline even if that plan was wrong.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.checkpoint import CHECKPOINT_FORMAT, CheckpointStore, checkpoint_name
from trainer.export import load_run_checkpoint
from trainer.time_limit import MARGIN_SHARE, MIN_MARGIN_S
from trainer.train import TrainArgs, train

RESTART_S = 8.0  # a piece's start: the checkpoint read, the shard check, the validation tasks
MAX_CHUNK_STEPS = 20_000


class TrainerFailed(RuntimeError):
    """The trainer stopped with an error (its own line is printed above)."""


def trainer_limit(deadline_after_start: float) -> float:
    """The ``--time-limit`` (seconds from the process's start) whose safety margin ends at
    ``deadline_after_start``: the trainer then stops by that deadline (earlier, by its guess
    for a checkpoint write, until it has measured one: ``trainer.time_limit``)."""
    # the margin is MIN_MARGIN_S, or MARGIN_SHARE of a long limit
    return max(deadline_after_start + MIN_MARGIN_S, deadline_after_start / (1 - MARGIN_SHARE))


def chunk_steps(seconds_per_step: float | None, chunk_seconds: float, first: int,
                per_shard: int) -> int:
    """Steps of the next chunk: about ``chunk_seconds`` at the measured speed (``first`` before
    any), a whole number of shards."""
    if seconds_per_step is None or seconds_per_step <= 0:
        steps = first
    else:
        steps = min(MAX_CHUNK_STEPS, max(1, int(chunk_seconds / seconds_per_step)))
    return max(per_shard, math.ceil(steps / per_shard) * per_shard)


def steps_that_fit(seconds_left: float, seconds_per_step: float | None) -> int | None:
    """How many steps fit in ``seconds_left`` at the measured speed (None: not measured)."""
    if seconds_per_step is None:
        return None
    return max(0, int(seconds_left / seconds_per_step))


@dataclass
class PieceTimes:
    """Wall seconds and steps of the pieces trained, for the speed and the record."""

    seconds: float = 0.0
    steps: int = 0
    pieces: list[dict[str, Any]] = field(default_factory=list)

    def seconds_per_step(self) -> float | None:
        return self.seconds / self.steps if self.steps else None


class RelayTrainer:
    """Calls of the trainer on one run directory, from this process."""

    def __init__(self, config: Path, shards: Path, run_dir: Path, device: str,
                 threads: int | None, started_at: float,
                 before_piece: Callable[[], None] | None = None) -> None:
        self.config, self.shards, self.run_dir = config, shards, run_dir
        self.device, self.threads, self.started_at = device, threads, started_at
        self.before_piece = before_piece  # e.g. start what waited for some shards
        self.times = PieceTimes()

    def newest_step(self) -> int:
        entries = CheckpointStore(self.run_dir / "checkpoints").entries()
        return int(entries[-1]["step"]) if entries else 0

    def train_to(self, until: int, deadline: float | None, what: str) -> int:
        """Resume the run directory and train to step ``until``, or less if the time before
        ``deadline`` (``time.monotonic``) runs out; returns the step reached."""
        if self.before_piece is not None:
            self.before_piece()
        start = self.newest_step()
        limit = None if deadline is None else trainer_limit(deadline - self.started_at)
        began = time.monotonic()
        code = train(TrainArgs(config=self.config, shards=self.shards, run_dir=self.run_dir,
                               until_step=until, device=self.device, threads=self.threads,
                               time_limit_s=limit, started_at=self.started_at))
        if code != 0:
            raise TrainerFailed(f"the trainer stopped with exit status {code} during {what} "
                                "(its message is above)")
        reached = self.newest_step()
        seconds = time.monotonic() - began
        self.times.seconds += seconds
        self.times.steps += reached - start
        self.times.pieces.append({"what": what, "from": start, "to": reached,
                                  "seconds": round(seconds, 2)})
        return reached


def place_checkpoint(data: bytes, step: int, run_dir: Path) -> Path:
    """Write a checkpoint's bytes into ``run_dir/checkpoints`` with an index listing it alone,
    as the trainer writes one; returns its path."""
    directory = run_dir / "checkpoints"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(step)
    path.write_bytes(data)
    entry = {"file": path.name, "step": step, "bytes": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
    index = {"format": CHECKPOINT_FORMAT, "checkpoints": [entry]}
    (directory / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    return path


def snapshot(run_dir: Path, step: int, into: Path) -> Path:
    """A run directory of its own holding the checkpoint of ``step`` alone (the trainer's
    rotation may delete the original); returns the checkpoint's path there."""
    path, _ = load_run_checkpoint(run_dir, step)  # verified against the run's index
    shutil.rmtree(into, ignore_errors=True)
    return place_checkpoint(path.read_bytes(), step, into)
