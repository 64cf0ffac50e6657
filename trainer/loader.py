"""The data of each training step, read and assembled ahead of the step that uses it.

:class:`StepLoader` yields one :class:`StepData` per global step of a segment, in step order:
the step's address in the curriculum, this rank's tasks, and their micro-batches, collated
(and, for a GPU, in pinned memory, so that the copies to the device run asynchronously). With
``prefetch > 0`` a background thread does the reading and collating for up to ``prefetch``
steps ahead while the main thread computes; with ``prefetch = 0`` the main thread does it
when the step begins. The data are the same either way: the thread changes when they are
read, not what is read or in which order, so a run is bit-identical with or without it.

The time the main thread waits for a step's data is measured (:attr:`StepLoader.wait_seconds`);
the trainer logs its share of the step time. An error while reading (a damaged shard) reaches
the main thread when it asks for that step, as if the step had read it itself. :meth:`close`
stops the thread and waits for it: the trainer closes the loader at the end of a segment, on a
stop request and on any exception, so no thread outlives the segment.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trainer.batching import MicroBatch

THREAD_NAME = "puicl-step-loader"
# how long close() waits for a thread busy reading a shard before giving up on it (it is a
# daemon thread, so it cannot keep the process alive)
JOIN_TIMEOUT_S = 60.0
_POLL_S = 0.1  # how often a blocked producer checks whether it should stop


@dataclass(frozen=True)
class StepData:
    """Everything one global step reads, ready for the forward pass."""

    global_step: int
    address: Any  # trainer.sampler.StepAddress: stage, phase, stored step
    micro_batches: list[MicroBatch]  # gradient_sum: all_reduce (empty under units)
    # gradient_sum: units: this rank's units of the step (trainer.units.StepUnit), unit order
    units: tuple = ()


@dataclass(frozen=True)
class _Failure:
    """An exception raised while preparing a step, delivered in that step's place."""

    error: BaseException


class StepLoader:
    """Steps ``[start, stop)`` prepared by ``prepare(global_step)``, in order.

    ``thread_setup`` runs first in the thread (the trainer sets the thread's CUDA device
    there, so that pinning memory does not create a context on GPU 0 in every process).
    ``guard``, a lock, is held by the thread while it prepares a step: the unit step holds it
    while it captures a CUDA graph, during which no other thread may call CUDA (pinning host
    memory does). Use as a context manager, or call :meth:`close` when done (also early)."""

    def __init__(
        self,
        prepare: Callable[[int], StepData],
        start: int,
        stop: int,
        prefetch: int,
        thread_setup: Callable[[], None] | None = None,
        guard: threading.Lock | None = None,
    ) -> None:
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        self._prepare = prepare
        self._thread_setup = thread_setup
        self._guard = guard if guard is not None else contextlib.nullcontext()
        self._next = start
        self._stop = stop
        self.wait_seconds = 0.0  # total time the consumer waited for data
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        if prefetch > 0 and start < stop:
            self._queue: queue.Queue = queue.Queue(maxsize=prefetch)
            self._thread = threading.Thread(
                target=self._produce, args=(start, stop), name=THREAD_NAME, daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ producer side ------
    def _produce(self, start: int, stop: int) -> None:
        if self._thread_setup is not None:
            try:
                self._thread_setup()
            except BaseException as err:
                self._put(_Failure(err))
                return
        for global_step in range(start, stop):
            if self._closing.is_set():
                return
            try:
                with self._guard:
                    item: StepData | _Failure = self._prepare(global_step)
            except BaseException as err:  # delivered to the consumer, which re-raises it
                item = _Failure(err)
            if not self._put(item) or isinstance(item, _Failure):
                return

    def _put(self, item: StepData | _Failure) -> bool:
        """Queue ``item``, waiting for room; False when the loader closed meanwhile."""
        while not self._closing.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    # ------------------------------------------------------------------ consumer side ------
    def __iter__(self) -> Iterator[StepData]:
        return self

    def __next__(self) -> StepData:
        if self._next >= self._stop or self._closing.is_set():
            raise StopIteration
        began = time.perf_counter()
        try:
            if self._thread is None:
                item: StepData | _Failure = self._prepare(self._next)
            else:
                item = self._get()
        finally:
            self.wait_seconds += time.perf_counter() - began
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        if item.global_step != self._next:  # a bug, never bad input: fail loudly
            raise RuntimeError(f"loader delivered step {item.global_step}, not {self._next}")
        self._next += 1
        return item

    def _get(self) -> StepData | _Failure:
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError(
                        f"the data loader thread ended before step {self._next}"
                    ) from None

    # ------------------------------------------------------------------ shutdown -----------
    def close(self) -> None:
        """Stop the thread (dropping what it prefetched) and wait for it to end."""
        self._closing.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        # free a producer blocked on a full queue at once, rather than at its next poll
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        thread.join(JOIN_TIMEOUT_S)
        if thread.is_alive():
            warnings.warn(
                f"the data loader thread is still reading after {JOIN_TIMEOUT_S:.0f} s; "
                "leaving it (a daemon thread) behind",
                stacklevel=2,
            )

    def __enter__(self) -> StepLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
