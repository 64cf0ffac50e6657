"""Which columns of a table are identifiers (a customer number, a row's hash, a name), not
features: the rule, and its constants, written once.

An identifier names a row and measures nothing. Kept as a feature, it gives the model a column
whose values say nothing about the class, or worse, one that tells the labeled rows from the
unlabeled ones by where they were numbered. The rule reads a column's values alone, never
their order, so that it finds the same columns however the rows are laid out: the one table of
``puicl predict --input`` and the same table given as ``--positives`` and ``--unlabeled``
alike, and a numpy array or a DataFrame of the same values alike.

A column is an identifier when

* its present values are whole numbers (an integer dtype, or floats or text that hold whole
  numbers only) or text (categories). A column with fractions (a weight, a ratio, a
  measurement) is never one: its values are all distinct as often as not;
* at least :data:`IDENTIFIER_MIN_ROWS` of its values are present; and
* at least :data:`IDENTIFIER_SHARE` of them are different values.

Whole numbers with a wide range can be all distinct and still be a measurement (an amount in
cents, a total intensity); such a column is dropped too, and said so, and ``keep_columns``
keeps it (docs/classifier.md, "Real tables").
"""

from __future__ import annotations

import numpy as np

from puicl_model.estimator.column_encoding import category_key
from puicl_model.estimator.columns import is_missing

__all__ = ["IDENTIFIER_MIN_ROWS", "IDENTIFIER_SHARE", "IdentifierWarning", "identifier_reason"]

# the share of a column's present values that must be distinct for it to be an identifier. An
# identifier may repeat a little (a customer met twice), but the development suite's
# whole-number measurements come close and must stay below it (docs/decisions.md,
# "Identifiers found by their values"). On fewer than 1,000 values it means: every value
# different
IDENTIFIER_SHARE = 0.999

# below this many present values, distinct whole numbers or words are too common by chance
IDENTIFIER_MIN_ROWS = 20

class IdentifierWarning(UserWarning):
    """The note that columns were dropped as identifiers, naming the rows their values were
    counted on: those ``fit`` read, which ``puicl predict`` says are a sample of the file's
    where they are."""


# float64 holds fractions only below this magnitude
_FLOAT_FRACTIONS_END = 2.0**52


def _distinct_whole_numbers(values: np.ndarray, numbers: np.ndarray) -> tuple[int, int] | None:
    """(distinct, present) of a numeric column whose present values are all whole numbers,
    else None. ``values``: the column as given; ``numbers``: as read as numbers."""
    present = ~np.isnan(numbers)
    if values.dtype.kind in "iu":  # exact, also beyond float64's 2**53
        return len(np.unique(values)), len(values)
    kept = numbers[present]
    # (from 2**52 on every float64 is whole: there, being whole says nothing of the column)
    if (values.dtype.kind == "b" or not np.all(kept == np.floor(kept))
            or (len(kept) and np.abs(kept).max() >= _FLOAT_FRACTIONS_END)):
        return None
    return len(np.unique(kept)), len(kept)


def _distinct_texts(values: np.ndarray) -> tuple[int, int]:
    """(distinct, present) of a categorical column, its values told apart as categories."""
    present = values[~is_missing(values)]
    return len({category_key(value) for value in present.tolist()}), len(present)


def identifier_reason(values: np.ndarray, numbers: np.ndarray | None) -> str | None:
    """Why the column ``values`` is an identifier, or None when it is not one. ``numbers``: the
    column read as numbers (:func:`puicl_model.estimator.columns.parse_numeric`), None for
    categories."""
    if numbers is None:
        counts, kind = _distinct_texts(values), "values"
    else:
        found = _distinct_whole_numbers(values, numbers)
        if found is None:
            return None
        counts, kind = found, "whole numbers"
    distinct, present = counts
    if present < IDENTIFIER_MIN_ROWS or distinct < IDENTIFIER_SHARE * present:
        return None
    return f"an identifier: {distinct:,} different {kind} in {present:,} rows"
