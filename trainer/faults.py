"""Fault injection for tests: a non-finite loss, or a SIGKILL, at a chosen step and rank.

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
  scheduler would: the job must stop on every rank after that step, with a checkpoint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_VAR = "PUICL_TRAINER_FAULTS"


KINDS = ("nonfinite_loss", "nonfinite_grad", "kill", "sigterm")


@dataclass(frozen=True)
class FaultPlan:
    points: frozenset[tuple[str, int, int]] = frozenset()  # (kind, step, rank)

    def corruption_at(self, step: int, rank: int) -> str | None:
        """"loss", "grad" or None: what ``accumulate_gradients`` corrupts at that step."""
        if ("nonfinite_grad", step, rank) in self.points:
            return "grad"
        if ("nonfinite_loss", step, rank) in self.points:
            return "loss"
        return None

    def kill_at(self, step: int, rank: int) -> bool:
        return ("kill", step, rank) in self.points

    def sigterm_at(self, step: int, rank: int) -> bool:
        return ("sigterm", step, rank) in self.points


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
