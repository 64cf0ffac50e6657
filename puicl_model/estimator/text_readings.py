"""Text columns that hold numbers or dates, with a few cells that are neither: what each cell of
a text column is (:class:`TextTally`), how the column is read (:meth:`TextTally.reading`), and
that reading applied to any rows of the column (:func:`text_as_numbers`,
:func:`text_as_datetimes`).

A column of text is read

* as **numbers** when at least 95 % of its present cells (missing values and missing-value
  tokens left out) are numbers: the other cells, typos and exports' "#VALUE!" or "unknown", are
  read as missing values. Without this, one stray word turns a column of amounts into one
  category per distinct number, or drops it as an identifier;
* as **dates** when at least 95 % of its present cells are dates or date-times written in ISO
  8601 (``2024-03-01``, ``2024-03-01 12:30``, ``2024-03-01T12:30:00.250``; with a UTC offset or
  ``Z``, ``2024-03-01T12:30:00+01:00``, read as the instant in UTC), all with a time zone or all
  without: the other cells are read as missing values. A date becomes seconds since
  1970-01-01, as a date column of a Parquet file or a ``datetime64`` column does, so that a
  table scores the same bytes from a CSV and from a Parquet file;
* as text (categories) otherwise, as before. A column that looks like dates but is not read as
  dates (another format, such as ``03/01/2024``, whose day and month order no cell can settle;
  formats mixed beyond the 5 %; time zones on some cells only) is named in a note that says why
  (:meth:`TextTally.dates_refused`).

ISO 8601 only, because it is the one written form of a date whose reading is not a guess: in
``03/01/2024`` the day and the month can be either, and a column whose days never pass 12 gives
no cell to tell. It is what ``DataFrame.to_csv``, databases and ``datetime.isoformat`` write.

The classifier tallies a column's fitted rows (:mod:`puicl_model.estimator.preprocessing`),
``puicl predict`` every row of a CSV, batch by batch (:mod:`puicl_model.files.table_io`); both
decide with :meth:`TextTally.reading` and read the cells with the functions here, so a column is
read alike by both.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from puicl_model.estimator.columns import MISSING_TOKENS, is_missing, moments_in_seconds

__all__ = ["DATES", "DATE_READINGS", "NUMBERS", "READINGS", "STRAY_SHARE", "ZONED_DATES",
           "TextTally", "cell_kinds", "numbers_left_as_text", "read_text", "text_as_datetimes",
           "text_as_numbers"]

# the readings of a text column: its numbers, its dates without a time zone, its dates with one
NUMBERS, DATES, ZONED_DATES = "numbers", "dates", "dates+zone"
DATE_READINGS = (DATES, ZONED_DATES)
READINGS = (NUMBERS, *DATE_READINGS)

# The share of a column's present cells that may be neither numbers (or dates) and still be
# read as missing values rather than keep the column text. One typo, an "#VALUE!" or an
# "unknown" in a few rows should not turn a column of amounts into categories (or drop it as an
# identifier): reading those cells as missing costs the model little. Where more than one cell
# in twenty is a word, the words are likely values the column means (a code system that mixes
# numbers and letters, "none", "over 90"); reading them as missing would drop a real share of
# the column, so such a column stays text, as before, with the warning that it is mostly
# numbers. On fewer than 20 present cells no stray cell is allowed.
STRAY_SHARE = 0.05

# what a cell is: a number, an ISO 8601 date without / with a time zone, another text written
# like a date, or something else; -1: no value (missing, a missing-value token)
_NUMBER, _NAIVE, _ZONED, _DATE_LIKE_OTHER, _OTHER, _ABSENT = 0, 1, 2, 3, 4, -1
_KINDS = 5
_READING_KIND = {NUMBERS: _NUMBER, DATES: _NAIVE, ZONED_DATES: _ZONED}

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?"
                       r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?)?")
# written like a date in any order (03/01/2024, 1.3.24, 2024/03/01, 2024-13-01): for the note
# that says why such a column is not read as dates
_DATE_LIKE = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[T ,]+\d{1,2}:\d{2}\S*)?\s*\S*")
# the distinct stray texts a tally keeps to name in a note (their counts beyond it are kept)
_KEPT_EXAMPLES = 50


def _as_float(text: str) -> float | None:
    """``text`` as ``float`` reads it (as :func:`puicl_model.estimator.columns.parse_numeric`
    does: "NaN" spelled out is a missing value, "True" is no number), or None."""
    try:
        return float(text)
    except ValueError:
        return None


def _text_kinds(texts: list[str]) -> np.ndarray:
    """The kind of each distinct text: no value (a missing-value token), a number, a valid ISO
    8601 date without or with a time zone (surrounding spaces left out), another text written
    like a date (an invalid ISO date among them), or another text."""
    kinds = np.full(len(texts), _OTHER, dtype=np.int8)
    naive, zoned = [], []
    for index, text in enumerate(texts):
        stripped = text.strip()
        first = stripped[:1]
        if stripped.lower() in MISSING_TOKENS:
            kinds[index] = _ABSENT
        elif not (first.isdigit() or first in "+-.iInN"):
            continue  # (a word: no number, no date; most texts end here, cheaply)
        elif first.isdigit() and stripped[4:5] == "-" and stripped[7:8] == "-":
            # YYYY-MM-...: no number (a float has one minus after a digit at most)
            found = _ISO_DATE.fullmatch(stripped)
            if found is not None:
                (zoned if found.group("zone") else naive).append(index)
            if found is not None or _DATE_LIKE.fullmatch(stripped):
                kinds[index] = _DATE_LIKE_OTHER  # (a valid ISO date: its kind, below)
        elif (number := _as_float(stripped)) is not None:
            kinds[index] = _ABSENT if math.isnan(number) else _NUMBER  # (NaN spelled out)
        elif first.isdigit() and _DATE_LIKE.fullmatch(stripped):
            kinds[index] = _DATE_LIKE_OTHER
    for group, kind in ((naive, _NAIVE), (zoned, _ZONED)):
        if group:  # a calendar check: 2024-02-30 matches the pattern but is no date
            parsed = _parse_iso([texts[index].strip() for index in group], kind == _ZONED)
            valid = np.asarray(group)[parsed.notna().to_numpy()]
            kinds[valid] = kind
    return kinds


def _parse_iso(texts: Any, zoned: bool) -> Any:
    import pandas as pd

    return pd.to_datetime(pd.Series(texts, dtype=object), format="ISO8601", errors="coerce",
                          utc=zoned)


def _text(cell: Any) -> str:
    return cell.decode("utf-8", "replace") if isinstance(cell, bytes) else str(cell)


def _distinct(values: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(per cell: the index of its text among the distinct texts, -1 where it is missing; the
    distinct texts; the kind of each). A cell is read by its text: a number held as a number,
    or a date held as a date object, is read as its text is."""
    import pandas as pd

    codes = np.full(len(values), -1, dtype=np.int64)
    present = np.flatnonzero(~is_missing(values))
    cells = values[present].astype(object)
    if pd.api.types.infer_dtype(cells, skipna=False) != "string":
        cells = np.array([_text(cell) for cell in cells.tolist()], dtype=object)
    inner, distinct = pd.factorize(cells)
    codes[present] = inner
    texts = [str(text) for text in distinct]
    return codes, texts, _text_kinds(texts)


def cell_kinds(values: np.ndarray) -> np.ndarray:
    """Per cell of the column ``values``: what it is (a number, an ISO date without or with a
    time zone, another text written like a date, something else) or -1 where it holds no
    value (missing, a missing-value token). Each distinct text is looked at once."""
    codes, _, kinds = _distinct(values)
    return np.where(codes >= 0, kinds[np.maximum(codes, 0)] if len(kinds) else _ABSENT,
                    _ABSENT).astype(np.int8)


@dataclass
class TextTally:
    """What the present cells of a text column are, counted over one or several reads of it
    (the batches of a CSV): numbers, ISO 8601 dates without and with a time zone, other texts
    written like dates, other texts; and the commonest texts of each kind, to name in a note."""

    present: int = 0
    counts: list[int] = field(default_factory=lambda: [0] * _KINDS)  # by kind
    examples: list[Counter] = field(default_factory=lambda: [Counter() for _ in range(_KINDS)])

    def _example(self, kind: int, text: str, count: int) -> None:
        kept = self.examples[kind]
        if text in kept or len(kept) < _KEPT_EXAMPLES:
            kept[text] += count

    def add(self, values: np.ndarray) -> TextTally:
        """Count the cells of ``values`` (one read of the column)."""
        codes, texts, kinds = _distinct(values)
        counts = np.bincount(codes[codes >= 0], minlength=len(texts))
        for kind in range(_KINDS):
            mine = np.flatnonzero(kinds == kind)
            self.present += int(counts[mine].sum())
            self.counts[kind] += int(counts[mine].sum())
            # (the commonest texts only: a note names three)
            mine = mine[np.argsort(-counts[mine], kind="stable")[:_KEPT_EXAMPLES]]
            for index in mine.tolist():
                self._example(kind, texts[index], int(counts[index]))
        return self

    def add_numbers(self, count: int) -> None:
        """Count ``count`` cells read as numbers already (a batch pandas read as numbers)."""
        self.present += count
        self.counts[_NUMBER] += count

    def add_others(self, values: Any) -> None:
        """Count the present cells of a batch that are neither numbers nor dates (booleans)."""
        for text, count in Counter(map(str, values)).items():
            self.present += count
            self.counts[_OTHER] += count
            self._example(_OTHER, text, count)

    def reading(self) -> str | None:
        """How the column is read: :data:`NUMBERS`, :data:`DATES`, :data:`ZONED_DATES`
        (its other cells read as missing values), or None: as text (module docstring)."""
        if self.present == 0:
            return None
        for reading in READINGS:
            if self.strays(reading) <= STRAY_SHARE * self.present:
                return reading
        return None

    def strays(self, reading: str) -> int:
        """The present cells that ``reading`` reads as missing values."""
        return self.present - self.counts[_READING_KIND[reading]]

    def _shown(self, kinds: list[int], shown: int = 3) -> str:
        """The commonest texts of ``kinds``, as a note names them."""
        counted: Counter = Counter()
        for kind in kinds:
            counted.update(self.examples[kind])
        common = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
        text = ", ".join(f"{cell!r} ×{count}" for cell, count in common[:shown])
        return text + (" and others" if len(common) > shown else "")

    def stray_note(self, reading: str) -> str:
        """"1 of its 300 cells (0.3%): 'abc' ×1": the cells ``reading`` reads as missing."""
        strays = self.strays(reading)
        others = [kind for kind in range(_KINDS) if kind != _READING_KIND[reading]]
        share = strays / self.present
        shown = "under 0.1%" if 0 < share < 0.0005 else f"{share:.1%}"
        return f"{strays:,} of its {self.present:,} cells ({shown}): {self._shown(others)}"

    def dates_refused(self) -> str | None:
        """Why a column that looks like dates (at least half its present cells written like a
        date) is not read as dates, or None where it does not look like dates or is read as
        dates or numbers."""
        naive, zoned = self.counts[_NAIVE], self.counts[_ZONED]
        date_like = naive + zoned + self.counts[_DATE_LIKE_OTHER]
        if self.reading() is not None or self.present == 0 or 2 * date_like < self.present:
            return None
        if naive and zoned and self.present - naive - zoned <= STRAY_SHARE * self.present:
            return (f"{zoned:,} of its {naive + zoned:,} ISO 8601 dates have a time zone and "
                    f"{naive:,} have none")
        if naive + zoned == 0:
            example = self.examples[_DATE_LIKE_OTHER].most_common(1)[0][0]
            return (f"written as {example!r}, not in ISO 8601 (YYYY-MM-DD): the order of day "
                    "and month is not guessed")
        kind = _NAIVE if naive >= zoned else _ZONED
        others = [other for other in range(_KINDS) if other != kind]
        strays = self.present - self.counts[kind]
        return (f"mixed formats: {strays:,} of {self.present:,} cells are not ISO 8601 dates "
                f"({self._shown(others)}), more than the {STRAY_SHARE:.0%} that may be read "
                "as missing")


def text_as_numbers(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(the column ``values`` as float64, its cells that are not numbers read as NaN; how many
    present cells were read so) under the reading :data:`NUMBERS`."""
    if values.dtype.kind in "fiu":
        return values.astype(np.float64), 0
    codes, texts, kinds = _distinct(values)
    numbers = np.array([float(text) if kind == _NUMBER else np.nan
                        for text, kind in zip(texts, kinds.tolist(), strict=True)] + [np.nan])
    return numbers[np.where(codes >= 0, codes, len(texts))], _strays(codes, kinds, _NUMBER)


def _strays(codes: np.ndarray, kinds: np.ndarray, kind: int) -> int:
    """How many present cells are not of ``kind``."""
    present = kinds[codes[codes >= 0]]
    return int(np.count_nonzero((present != _ABSENT) & (present != kind)))


def text_as_datetimes(values: np.ndarray, reading: str) -> tuple[Any, int]:
    """(the column ``values`` as a pandas datetime Series, in UTC under
    :data:`ZONED_DATES`, NaT where a cell is not an ISO 8601 date of the reading's kind; how
    many present cells were read so)."""
    kind = _READING_KIND[reading]
    codes, texts, kinds = _distinct(values)
    dates = [text.strip() if text_kind == kind else None
             for text, text_kind in zip(texts, kinds.tolist(), strict=True)]
    parsed = _parse_iso([*dates, "1970-01-01"], reading == ZONED_DATES)  # (a date: its dtype)
    parsed.iloc[-1] = None  # the missing cells' NaT
    read = parsed.iloc[np.where(codes >= 0, codes, len(texts))].reset_index(drop=True)
    return read, _strays(codes, kinds, kind)


def numbers_left_as_text(values: np.ndarray) -> np.ndarray:
    """The text column ``values`` under the reading :data:`NUMBERS` with its cells left as
    text, those that are not numbers (nor missing) made missing (NaN): what ``puicl predict``
    hands the classifier, which reads the rest as :func:`text_as_numbers` does."""
    kinds = cell_kinds(values)
    kept = values.astype(object)
    kept[(kinds != _ABSENT) & (kinds != _NUMBER)] = np.nan
    return kept


def read_text(values: np.ndarray, reading: str) -> tuple[np.ndarray, int]:
    """(the text column ``values`` as float64 under ``reading``: numbers, or dates as seconds
    since 1970-01-01; how many present cells it read as missing)."""
    if reading == NUMBERS:
        return text_as_numbers(values)
    dates, strays = text_as_datetimes(values, reading)
    return moments_in_seconds(dates), strays
