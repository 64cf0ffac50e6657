"""SIGTERM / SIGINT during training: finish the step, checkpoint, exit.

A cluster scheduler sends SIGTERM before it kills a job; the flag set here travels in the
step's all-reduced decision (``trainer.step``), so every rank stops after the same step.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any


class StopFlag:
    """Set by SIGTERM/SIGINT; the segment finishes the step, checkpoints and exits."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        # a second signal takes the default path (immediate exit)
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
