"""``--time-limit``: end a segment with a checkpoint before a batch scheduler's walltime.

A :class:`TimeBudget` answers one question during each step, just before the step's
all-reduced decision: if training goes on, can the *next* step still finish, with what the
loop does around it (validation, checkpoints) and the segment's final checkpoint, inside the
limit minus a safety margin? If not, the current step is the segment's last. The estimates
come from this segment's own measurements: the longest of the recent steps (steps grow
through the curriculum, so the longest recent one is the safer guess than their mean), and
the longest validation and checkpoint write so far. Before a validation or a checkpoint has
been measured, a conservative guess stands in (see :meth:`TimeBudget.validation_estimate`,
:meth:`TimeBudget.checkpoint_estimate`).

Every rank asks its own budget and the answers travel in the step's all-reduce (any rank
asking to stop stops all), so all ranks stop after the same step. A segment always trains at
least the step it is in: the first step cannot be estimated before it has run.

The clock is injected: the trainer uses :class:`MonotonicClock`; tests use
``trainer.faults.FakeStepClock``, whose time advances by a fixed amount per step, so that when a
segment stops does not depend on the machine's speed.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Protocol

# the margin kept free at the end: the process's exit, the launcher's teardown, a slow file
# system; at least MIN_MARGIN_S, and MARGIN_SHARE of the limit for long limits
MIN_MARGIN_S = 30.0
MARGIN_SHARE = 0.02
# stands in for a checkpoint write not yet measured in this segment (paper.yaml's checkpoint
# is ~20 MB; this leaves room for a slow shared file system)
UNMEASURED_CHECKPOINT_S = 30.0
RECENT_STEPS = 50  # step times the estimate looks back on


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since an arbitrary origin, never decreasing."""
        ...

    def step_started(self) -> None:
        """Called as each training step begins (a fake clock advances here)."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic``."""

    def now(self) -> float:
        return time.monotonic()

    def step_started(self) -> None:
        pass


def safety_margin(limit_s: float) -> float:
    return max(MIN_MARGIN_S, MARGIN_SHARE * limit_s)


class TimeBudget:
    """How much of a segment's time limit is used, and whether another step fits.

    ``origin`` is the clock reading the limit counts from (the process start for the real
    clock, so that start-up time counts too)."""

    def __init__(self, limit_s: float, clock: Clock, origin: float | None = None) -> None:
        if limit_s <= 0:
            raise ValueError(f"the time limit must be positive, got {limit_s} s")
        self.limit_s = limit_s
        self.margin_s = safety_margin(limit_s)
        self.clock = clock
        self.origin = clock.now() if origin is None else origin
        self._steps: deque[float] = deque(maxlen=RECENT_STEPS)
        self._validation_s: float | None = None
        self._checkpoint_s: float | None = None

    def elapsed(self) -> float:
        return self.clock.now() - self.origin

    # ------------------------------------------------------------- measurements -----------
    def record_step(self, seconds: float) -> None:
        self._steps.append(seconds)

    def record_validation(self, seconds: float) -> None:
        self._validation_s = max(seconds, self._validation_s or 0.0)

    def record_checkpoint(self, seconds: float) -> None:
        self._checkpoint_s = max(seconds, self._checkpoint_s or 0.0)

    # ------------------------------------------------------------- estimates --------------
    def step_estimate(self) -> float:
        """The longest of the recent steps (0 before the first one has finished)."""
        return max(self._steps, default=0.0)

    def validation_estimate(self, steps_equivalent: float) -> float:
        """The longest validation so far; before one was measured, the time of training
        ``steps_equivalent`` steps (validation's tasks in training steps: its forward passes
        alone cost about a third of that, so this is generous)."""
        if self._validation_s is not None:
            return self._validation_s
        return self.step_estimate() * steps_equivalent

    def checkpoint_estimate(self) -> float:
        if self._checkpoint_s is not None:
            return self._checkpoint_s
        return UNMEASURED_CHECKPOINT_S

    # ------------------------------------------------------------- the decision -----------
    def must_stop(self, validations: int, checkpoints: int, validation_steps: float) -> bool:
        """Whether the step now running must be the segment's last.

        Going on means finishing this step, then ``validations`` validations and
        ``checkpoints`` checkpoints on the way (this step's and the next one's, by the
        loop's cadences), the next step, and the final checkpoint; all of it must end
        ``margin_s`` before the limit. (What is left of the current step is small: its
        forward and backward passes are done when this is asked; the margin covers it.)
        """
        needed = (
            self.step_estimate()
            + validations * self.validation_estimate(validation_steps)
            + (checkpoints + 1) * self.checkpoint_estimate()
            + self.margin_s
        )
        return self.elapsed() + needed > self.limit_s
