"""The checks every value of a saved classifier's fitted state passes, in one line naming the
entry (:class:`Refused`): numbers, arrays, mappings and text as scoring reads them. Used by
:mod:`~.saved_values` and :mod:`~.saved_portfolio_values`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["Refused", "check_array", "check_mapping", "check_number", "check_text", "shown"]


class Refused(Exception):
    """A value scoring cannot read: the entry's name and what is wrong with it."""

    def __init__(self, entry: str, problem: str) -> None:
        super().__init__(f"{entry} {problem}")


def shown(value: Any) -> str:
    """``value`` for a message: its repr, cut with an ellipsis past 40 characters (a whole
    number of 10**30 digits must not read as a short one)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def check_number(entry: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
            above: bool = False, whole: bool = False) -> float:
    """``value`` as a finite number in [``low``, ``high``] (above ``low`` with ``above``;
    a whole number with ``whole``); numpy's scalars count, bools do not."""
    kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
    if not isinstance(value, kinds) or isinstance(value, (bool, np.bool_)):
        raise Refused(entry, f"is a {type(value).__name__}, not a "
                              f"{'whole number' if whole else 'number'}")
    number = int(value) if whole else float(value)  # (a whole number: exact, of any size)
    if not whole and not math.isfinite(number):
        raise Refused(entry, f"is {shown(value)}, not a finite number")
    if number < low or number > high or (above and number <= low):
        bounds = f"above {low:g}" if above and high == math.inf else (
            f"at least {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]")
        raise Refused(entry, f"is {shown(value)}, not {bounds}")
    return number


def check_array(entry: str, value: Any, *, ndim: int = 1, length: int | None = None,
           kinds: str = "f", low: float = -math.inf, high: float = math.inf,
           above: bool = False, nonempty: bool = False, ordered: bool = False) -> np.ndarray:
    """``value`` as an array of ``ndim`` dimensions (``length`` rows) of ``kinds`` (numpy's
    letters), finite, every value in [``low``, ``high``] (above ``low`` with ``above``), with
    at least one value with ``nonempty``, sorted ascending with ``ordered``."""
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in kinds:
        shape = list(value.shape) if isinstance(value, np.ndarray) else type(value).__name__
        raise Refused(entry, f"is {shape} of {getattr(value, 'dtype', '-')}, not a "
                              f"{ndim}-D array of {kinds!r} numbers")
    if length is not None and len(value) != length:
        raise Refused(entry, f"holds {len(value)} rows where {length} belong")
    if nonempty and not value.size:
        raise Refused(entry, "is empty")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise Refused(entry, "holds NaN or infinite values")
    if value.size and (value.min() < low or value.max() > high or (above and value.min() <= low)):
        bounds = f"above {low:g}" if above and high == math.inf else f"in [{low:g}, {high:g}]"
        raise Refused(entry, f"holds {float(value.min()):g} to {float(value.max()):g}, not "
                              f"{bounds}")
    if ordered and value.size > 1 and (np.diff(value, axis=0) < 0).any():
        raise Refused(entry, "is not sorted")
    return value


def check_mapping(entry: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise Refused(entry, f"is a {type(value).__name__}, not a mapping")
    return value


def check_text(entry: str, value: Any,
               among: tuple[str, ...] | frozenset[str] | None = None) -> str:
    if not isinstance(value, str) or (among is not None and value not in among):
        wanted = "text" if among is None else " or ".join(map(repr, sorted(among)))
        raise Refused(entry, f"is {shown(value)}, not {wanted}")
    return value
