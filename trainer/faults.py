"""Test hooks: faults (a non-finite loss, a SIGKILL, ...) at a chosen step and rank; a fake clock.

The faults reach a step through its hook point (``trainer.hooks``): ``trainer.train``
installs :meth:`FaultPlan.hook` when the variable below is set, and a test may install a plan
itself (``trainer.hooks.installed(parse_faults("kill@3:0").hook)``).

Set ``PUICL_TRAINER_FAULTS="KIND@STEP:RANK[,KIND@STEP:RANK...]"`` (STEP = 0-based global step,
RANK = rank in the job) before starting the trainer. Unset in normal runs. Kinds:

* ``nonfinite_grad`` -- the loss of that rank's first micro-batch at that step becomes NaN
  before the backward pass, the path a real divergence takes (NaN gradients, spread to every
  rank by DDP): every rank must skip the step together, none may hang;
* ``nonfinite_loss`` -- that rank's loss becomes NaN after the backward pass, gradients stay
  finite: only the all-reduced flag tells the other ranks to skip;
* ``kill`` -- the process SIGKILLs itself in the middle of that step (after the backward
  pass, before the optimizer step): a crash at the worst moment, for the resume tests;
* ``sigterm`` -- the process sends itself SIGTERM at the start of that step, as a cluster
  scheduler would: the job must stop on every rank after that step, with a checkpoint;
* ``nondeterministic`` -- after the backward pass, an operation that has no deterministic
  kernel runs under strict deterministic mode (``trainer.determinism``), the path such an
  operation takes on CUDA with ``training.deterministic`` on: the run must stop with one line
  naming the operation and the key, on any device.

``PUICL_TRAINER_FAKE_STEP_SECONDS="S"`` (or ``"S0,S1,..."``, one value per rank) replaces the
clock of ``--time-limit`` (``trainer.time_limit``) by :class:`FakeStepClock`: time stands still
except that each training step takes exactly S seconds, so tests decide where a time-limited
segment stops without racing the wall clock.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import torch

from trainer.determinism import restored_mode
from trainer.hooks import NO_HOOK, StepHook
from trainer.time_limit import Clock, MonotonicClock

ENV_VAR = "PUICL_TRAINER_FAULTS"
CLOCK_ENV_VAR = "PUICL_TRAINER_FAKE_STEP_SECONDS"


KINDS = ("nonfinite_loss", "nonfinite_grad", "kill", "sigterm", "nondeterministic")


@dataclass(frozen=True)
class FaultPlan:
    points: frozenset[tuple[str, int, int]] = frozenset()  # (kind, step, rank)

    def corruption_at(self, step: int, rank: int) -> str | None:
        """"loss", "grad" or None: what the step corrupts at that step on that rank."""
        if ("nonfinite_grad", step, rank) in self.points:
            return "grad"
        if ("nonfinite_loss", step, rank) in self.points:
            return "loss"
        return None

    def kill_at(self, step: int, rank: int) -> bool:
        return ("kill", step, rank) in self.points

    def sigterm_at(self, step: int, rank: int) -> bool:
        return ("sigterm", step, rank) in self.points

    def hook(self, step: int, rank: int) -> StepHook:
        """The step hook of ``step`` on ``rank`` (a ``trainer.hooks.HookFactory``)."""
        if not any(s == step and r == rank for _, s, r in self.points):
            return NO_HOOK
        return _Faults(
            self.corruption_at(step, rank), self.kill_at(step, rank), self.sigterm_at(step, rank),
            ("nondeterministic", step, rank) in self.points,
        )


class _Faults(StepHook):
    """The faults of one step on one rank, at the step's hook points."""

    def __init__(self, corrupt: str | None, kill: bool, sigterm: bool,
                 nondeterministic: bool = False) -> None:
        self.corrupt, self.kill, self.sigterm = corrupt, kill, sigterm
        self.nondeterministic = nondeterministic

    def step_begins(self) -> None:
        if self.sigterm:
            os.kill(os.getpid(), signal.SIGTERM)

    def micro_batch_losses(self, index: int, losses: torch.Tensor) -> torch.Tensor:
        # NaN before the backward pass: NaN gradients, which DDP spreads to every rank
        if self.corrupt == "grad" and index == 0:
            return losses * float("nan")
        return losses

    def loss_sum(self, total: torch.Tensor) -> torch.Tensor:
        # NaN loss, finite gradients: only the all-reduced flag tells the other ranks
        if self.corrupt == "loss":
            total += float("nan")
        return total

    def backward_done(self) -> None:
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.nondeterministic:
            _run_an_op_without_a_deterministic_kernel()


def _run_an_op_without_a_deterministic_kernel() -> None:
    """``Tensor.put_`` (no deterministic kernel on any device) under strict deterministic
    mode, which is restored afterwards if the operation were ever to succeed."""
    with restored_mode():
        torch.use_deterministic_algorithms(True)
        torch.zeros(2).put_(torch.tensor([0]), torch.ones(1))


def parse_faults(text: str | None) -> FaultPlan:
    """Parse the environment variable's value (None or empty: no faults)."""
    if not text:
        return FaultPlan()
    points = set()
    for item in text.split(","):
        kind, _, where = item.strip().partition("@")
        step, _, rank = where.partition(":")
        if kind not in KINDS or not step.isdigit() or not rank.isdigit():
            raise ValueError(
                f"{ENV_VAR}: cannot parse {item!r}; expected KIND@STEP:RANK with KIND one of "
                f"{', '.join(KINDS)}"
            )
        points.add((kind, int(step), int(rank)))
    return FaultPlan(frozenset(points))


def faults_from_env() -> FaultPlan:
    return parse_faults(os.environ.get(ENV_VAR))


class FakeStepClock:
    """A clock on which every training step lasts ``seconds_per_step`` and nothing else
    takes any time: the whole step's time passes the moment it starts."""

    def __init__(self, seconds_per_step: float) -> None:
        self.seconds_per_step = seconds_per_step
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def step_started(self) -> None:
        self._now += self.seconds_per_step


def parse_fake_clock(text: str | None, rank: int) -> Clock:
    """The clock of ``rank`` for the variable's value (None or empty: the real clock)."""
    if not text:
        return MonotonicClock()
    try:
        seconds = [float(value) for value in text.split(",")]
    except ValueError:
        seconds = []
    if not seconds or not all(s > 0 for s in seconds):
        raise ValueError(
            f"{CLOCK_ENV_VAR}: cannot parse {text!r}; expected positive seconds per step, "
            "one value or one per rank"
        )
    if len(seconds) > 1 and rank >= len(seconds):
        raise ValueError(f"{CLOCK_ENV_VAR}={text!r} has no value for rank {rank}")
    return FakeStepClock(seconds[0] if len(seconds) == 1 else seconds[rank])


def clock_from_env(rank: int) -> Clock:
    return parse_fake_clock(os.environ.get(CLOCK_ENV_VAR), rank)
