"""A segment's shards, generated on the host's cores in the background, ahead of training.

``prior-gen`` writes the same bytes on any CPU, so a segment regenerates exactly the steps it
reads instead of carrying shards between machines. :class:`ShardQueue` runs one ``prior-gen``
command at a time (two never write one shard directory), in the order the jobs were added,
in a thread of its own; the relay adds the validation split first, then the steps it replays,
then its training steps a chunk ahead of the trainer, and waits on a job only when the
trainer needs its steps. ``prior-gen`` adds each shard to the manifest as it is written, and
the trainer reads the manifest when a chunk starts, so that a chunk trains while the next
one is generated (docs/training.md §9, "One GPU node").
"""

from __future__ import annotations

import queue
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from trainer.sampler import StepSampler
from trainer.shard_check import generate_commands, needed_steps


class GenerationError(RuntimeError):
    """A ``prior-gen`` command failed; the message quotes its last line."""


@dataclass
class _Job:
    ticket: int
    what: str
    commands: list[list[str]]


class ShardQueue:
    """``prior-gen`` commands run one after another in a background thread."""

    def __init__(self, config: Path, shards: Path, workers: int, log: Path) -> None:
        self.config, self.shards, self.workers, self.log = config, shards, workers, log
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._finished = 0  # the highest ticket done (jobs end in ticket order)
        self._failure: str | None = None
        self._changed = threading.Condition()
        self._process: subprocess.Popen | None = None
        self._tickets = 0
        self.busy_seconds = 0.0  # time prior-gen ran
        self.wait_seconds = 0.0  # time the relay waited for it
        self._thread = threading.Thread(target=self._work, name="prior-gen", daemon=True)
        self._thread.start()

    def _command(self, text: str) -> list[str]:
        words = shlex.split(text)  # "prior-gen --config ..." as the trainer spells it
        return [sys.executable, "-m", "prior_gen.cli", *words[1:], "--workers",
                str(self.workers)]

    def add(self, split: str, needed: dict, what: str, config: Path | None = None,
            out: Path | None = None) -> int:
        """Queue the steps ``needed`` ({stage: steps}) of ``split``; returns the job's ticket."""
        texts = generate_commands(needed, config or self.config, out or self.shards, split) \
            if needed else []
        self._tickets += 1
        self._jobs.put(_Job(self._tickets, what, [self._command(t) for t in texts]))
        return self._tickets

    def add_train_steps(self, sampler: StepSampler, start: int, stop: int) -> int:
        """Queue the train-split steps that global steps ``[start, stop)`` read."""
        return self.add("train", needed_steps(sampler, start, stop),
                        f"training steps {start}..{stop - 1}")

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            began = time.monotonic()
            failure = None
            for command in job.commands:
                failure = self._run(command)
                if failure:
                    failure = f"prior-gen failed on {job.what}: {failure}"
                    break
            with self._changed:
                self.busy_seconds += time.monotonic() - began
                self._finished = job.ticket
                self._failure = self._failure or failure
                self._changed.notify_all()
            if failure:
                return

    def _run(self, command: list[str]) -> str | None:
        with self.log.open("a") as handle:
            handle.write("$ " + shlex.join(command) + "\n")
            handle.flush()
            self._process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
            code = self._process.wait()
        if code == 0:
            return None
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return f"exit status {code}: {lines[-1] if lines else ''}"

    def is_done(self, ticket: int) -> bool:
        """Whether the job of ``ticket`` is done (raises if a job failed)."""
        with self._changed:
            if self._failure is not None:
                raise GenerationError(self._failure)
            return self._finished >= ticket

    def wait(self, ticket: int) -> None:
        """Block until the job of ``ticket`` (and every job before it) is done."""
        began = time.monotonic()
        with self._changed:
            while self._finished < ticket and self._failure is None:
                self._changed.wait(timeout=1.0)
            self.wait_seconds += time.monotonic() - began
            if self._failure is not None:
                raise GenerationError(self._failure)

    def close(self) -> None:
        """Drop the jobs not started and stop the one running (the segment is over)."""
        while not self._jobs.empty():
            self._jobs.get_nowait()
        self._jobs.put(None)
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self._thread.join(timeout=60)


class Lookahead:
    """The train split's steps queued so far, and the ticket that brings each range."""

    def __init__(self, queue_: ShardQueue, sampler: StepSampler, total_steps: int) -> None:
        self.queue, self.sampler, self.total = queue_, sampler, total_steps
        self.queued_until = 0
        self._ranges: list[tuple[int, int]] = []  # (stop step, ticket), in order

    def start_at(self, step: int) -> None:
        self.queued_until = step

    def queue_until(self, stop: int) -> None:
        """Queue the steps from the last queued one up to ``stop`` (capped at the run's end)."""
        stop = min(stop, self.total)
        if stop > self.queued_until:
            ticket = self.queue.add_train_steps(self.sampler, self.queued_until, stop)
            self._ranges.append((stop, ticket))
            self.queued_until = stop

    def ready(self, stop: int) -> None:
        """Block until steps up to ``stop`` are written (queueing them first if they are not)."""
        self.queue_until(stop)
        ticket = next((t for end, t in self._ranges if end >= min(stop, self.total)), None)
        if ticket is not None:
            self.queue.wait(ticket)
