"""The phase of long work, for the progress bars: what is being done ("fitting on a 20,000-row
sample", "scoring batch 2 (pool rows 100,001-200,000 of 872,000)", "estimating π: fold 1 of
2") and how far it has come.

Whoever starts a phase names it (:func:`phase`), and may give a callback that learns which
share of it is done; the loops that do the work (the passes of
:class:`puicl_model.passes.inference.PassScorer`, the contexts of
:func:`puicl_model.passes.query_rows.score_new_rows`) name their bars after the current phase
(:func:`describe`) and say how far they are (:func:`report`). So an outer bar, such as
``puicl predict``'s over the pool's rows, moves while one batch is scored, not only after it,
and no loop needs to know who listens. A phase lives in a context variable: another thread or
a dask worker starts with none.

Whether bars show at all is one rule (:func:`shows_progress`): the decision of whoever runs the
work, made once and handed down (``PUICLClassifier(progress=...)``; ``puicl predict`` decides
by its terminal and ``--no-progress``), else a bar on a terminal for long work; and one bar at
a time reports a piece of work, so that a loop inside a phase whose own bar hears how far it
is opens none.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["describe", "phase", "report", "shows_progress"]


@dataclass(frozen=True)
class _Phase:
    name: str
    advance: Callable[[float], object] | None  # called with the share of the phase done


_CURRENT: ContextVar[_Phase | None] = ContextVar("puicl_phase", default=None)


@contextlib.contextmanager
def phase(name: str, advance: Callable[[float], object] | None = None) -> Iterator[None]:
    """Run the block as the phase ``name``; ``advance(share)`` hears how far it is (0 to 1)."""
    token = _CURRENT.set(_Phase(name, advance))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def describe(default: str) -> str:
    """The current phase's name, or ``default`` outside any phase."""
    current = _CURRENT.get()
    return default if current is None else current.name


def report(done: int, total: int) -> None:
    """Tell the current phase that ``done`` of its ``total`` steps are done."""
    current = _CURRENT.get()
    if current is not None and current.advance is not None and total > 0:
        current.advance(min(1.0, done / total))


def shows_progress(progress: bool | None, long: bool = True) -> bool:
    """Whether a loop opens a progress bar: never inside a phase whose own bar hears it
    (:func:`phase` given ``advance``: that bar already moves with the loop); else ``progress``
    where it was decided (True or False), and on a terminal for ``long`` work where not."""
    current = _CURRENT.get()
    if current is not None and current.advance is not None:
        return False
    return progress if progress is not None else long and sys.stderr.isatty()
