"""Fault injection for tests: ``prior-gen`` crashes after a chosen number of shards.

Set ``PUICL_PRIOR_GEN_FAULTS="kill@N"`` before starting ``prior-gen``: the writing process
SIGKILLs itself right after the N-th shard of the run is published under its final name and
before its record reaches ``manifest.json``, the worst moment for the bookkeeping (a shard on
disk that the manifest does not know). Unset in normal runs.

A test can then crash a run at an exact point instead of polling a subprocess and racing it
to the finish line (the generator may finish every shard before the poll sees three).
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "PUICL_PRIOR_GEN_FAULTS"


def parse_kill_after(text: str | None) -> int | None:
    """The N of ``kill@N`` (None or empty: no fault)."""
    if not text:
        return None
    kind, _, count = text.strip().partition("@")
    if kind != "kill" or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV_VAR}: cannot parse {text!r}; expected kill@N with N >= 1")
    return int(count)


def kill_after_from_env() -> int | None:
    return parse_kill_after(os.environ.get(ENV_VAR))


def crash_if_planned(kill_after: int | None, shards_written: int) -> None:
    """SIGKILL this process once ``shards_written`` reaches the planned count."""
    if kill_after is not None and shards_written >= kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
