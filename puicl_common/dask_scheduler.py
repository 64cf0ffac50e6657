"""The one check of a dask scheduler address, for every command that takes ``--scheduler``
(``puicl predict``, ``prior-gen``): before any work or any file, it asks the scheduler who it
is and waits for a worker, within a time limit, and answers anything else in one line.

Why a check of its own: ``distributed.Client(address)`` on what is not a healthy scheduler
holds the command or ends in a traceback. A server that accepts connections but speaks another
protocol (an HTTP server) holds the connection for minutes; one that announces a frame of
exabytes makes dask allocate it (a MemoryError); a scheduler without workers takes the work and
waits forever, or fails later with a message of several lines, after the command has started
writing. Dask is an extra (``pip install "puicl[distributed]"``): it is imported on use.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["SchedulerUnreachable", "check_scheduler", "memory_per_thread"]


class SchedulerUnreachable(ValueError):
    """No healthy dask scheduler answers at the address given (bad input: one line)."""


def _scheduler_identity(address: str, timeout_s: float, said_s: float) -> dict[str, Any]:
    """The scheduler's answer to ``identity`` (its type, its workers), asked in a thread of
    its own and waited for at most ``timeout_s`` in all: a server that accepts connections
    but does not speak dask's protocol would otherwise hold the connection for minutes, and
    one that announces a message of exabytes ends in a MemoryError. ``said_s``: the time limit
    the user knows of, for the message."""
    import asyncio
    import threading

    from distributed.core import rpc

    async def ask() -> dict[str, Any]:
        scheduler = rpc(address, timeout=timeout_s)
        try:
            return await scheduler.identity()
        finally:
            await scheduler.close_rpc()

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["identity"] = asyncio.run(asyncio.wait_for(ask(), timeout_s))
        except BaseException as err:  # whatever a stranger's server provokes
            outcome["error"] = err

    # a daemon thread: should the wait itself hang, the command still ends on time
    thread = threading.Thread(target=run, name="puicl-scheduler-check", daemon=True)
    thread.start()
    thread.join(timeout_s + 1.0)
    error = outcome.get("error")
    if thread.is_alive() or isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        raise SchedulerUnreachable(f"cannot reach the dask scheduler at {address}: no answer "
                                   f"within {said_s:g} s")
    if isinstance(error, MemoryError):  # a length header no dask peer would send
        raise SchedulerUnreachable(f"cannot reach the dask scheduler at {address}: what "
                                   "answers there announced a message too large to hold; it "
                                   "is not a dask scheduler")
    if error is not None:
        what = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise SchedulerUnreachable(f"cannot reach the dask scheduler at {address}: "
                                   f"{type(error).__name__}{': ' + what if what else ''} (is "
                                   "a dask scheduler listening there?)")
    identity = outcome.get("identity")
    if not isinstance(identity, dict) or identity.get("type") != "Scheduler":
        raise SchedulerUnreachable(f"cannot reach the dask scheduler at {address}: what "
                                   "answers there is not a dask scheduler")
    return identity


def check_scheduler(address: str, timeout_s: float) -> dict[str, Any]:
    """Ask the scheduler at ``address`` who it is, waiting at most ``timeout_s`` in all, and
    wait as long for it to have a worker; a :class:`SchedulerUnreachable` in one line where
    none answers, what answers is no dask scheduler, or no worker joins. An ImportError in one
    line where dask.distributed is not installed. Returns the scheduler's identity (its
    ``workers``: each one's ``nthreads`` and ``memory_limit``)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ImportError("--scheduler needs dask.distributed: pip install "
                          "\"puicl[distributed]\"") from None
    timeout_s = float(timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:  # each question gets what is left of the time, so the whole check keeps it
        identity = _scheduler_identity(address, max(0.5, deadline - time.monotonic()),
                                       timeout_s)
        if identity.get("n_workers", len(identity.get("workers", {}))):
            return identity
        if time.monotonic() >= deadline:
            raise SchedulerUnreachable(f"the dask scheduler at {address} has no workers (none "
                                       f"joined within {timeout_s:g} s); start some, e.g. "
                                       f"dask worker {address}")
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def memory_per_thread(identity: dict[str, Any]) -> int | None:
    """The least memory a task of the scheduler's workers may hold: the smallest worker's
    ``memory_limit`` over its threads (each runs a task), or None where no worker has a limit."""
    shares = []
    for worker in (identity.get("workers") or {}).values():
        limit = worker.get("memory_limit") if isinstance(worker, dict) else None
        if isinstance(limit, (int, float)) and limit > 0:
            shares.append(int(limit) // max(1, int(worker.get("nthreads") or 1)))
    return min(shares) if shares else None
