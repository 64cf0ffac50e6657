"""Numeric columns that are exact affine copies of earlier ones (``affine_copies="drop"``).

A column ``x_j = a·x_i + b`` (``a ≠ 0``: the same quantity in other units, or negated) carries
nothing that ``x_i`` does not, yet the model's attention over features weighs that quantity
twice. Standardized over the fitted rows, such a pair is identical up to sign, which is the
test made here: column ``j`` copies an earlier column ``i`` when the two standardized columns,
or one and the other's negative, differ by at most :data:`TOLERANCE` in every fitted row, with
their missing values in the same rows.

The values compared are the column's numbers with missing values filled by the column's
median, before the ``numeric`` transform: a copy is one whatever the encoding, so every view
of an ensemble drops the same columns. Constant columns and saved row numbers are left to
their own rules (:mod:`puicl_model.preprocessing`) and are neither copies nor copied.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TOLERANCE", "find_affine_copies"]

# the largest difference of two standardized columns (in standard deviations, every row) that
# still makes them copies: far above the rounding of a·x + b in float64 (~1e-15), far below a
# measurement of the same quantity taken twice
TOLERANCE = 1e-6

# pairs are first screened by their correlation, one matrix product: a copy within TOLERANCE
# has |correlation| >= 1 - TOLERANCE**2 / 2, so this margin keeps every copy, whatever the
# rounding of the product, and the screened pairs are then compared row by row
_SCREEN = 1e-6

# columns per block of the correlation product (bounds its memory on wide tables)
_BLOCK = 256


def _standardized(values: np.ndarray) -> np.ndarray:
    """``values`` centred and scaled over its rows; divided by its largest magnitude first, so
    that neither the sum nor the squares overflow or underflow (the result is the same up to
    rounding)."""
    shrunk = values / np.abs(values).max()
    return (shrunk - shrunk.mean()) / shrunk.std()


def find_affine_copies(values: list[np.ndarray], gaps: list[np.ndarray],
                       ) -> dict[int, tuple[int, int]]:
    """``{j: (i, sign)}`` for each column ``j`` that is an affine copy of the earlier column
    ``i`` (``sign``: +1 for ``a > 0``, -1 for ``a < 0``).

    ``values[k]``: column k's fitted numbers with missing values filled (float64, finite, not
    constant); ``gaps[k]``: where its values were missing. A copy of a copy names the first
    column of the chain, which stays."""
    if len(values) < 2:
        return {}
    standardized = np.stack([_standardized(column) for column in values], axis=1)
    n_rows, n_columns = standardized.shape
    copies: dict[int, tuple[int, int]] = {}
    for start in range(0, n_columns, _BLOCK):
        stop = min(start + _BLOCK, n_columns)
        correlation = standardized[:, start:stop].T @ standardized[:, :stop] / n_rows
        for j in range(start, stop):
            row = correlation[j - start, :j]
            for i in np.flatnonzero(np.abs(row) >= 1.0 - _SCREEN).tolist():
                if i in copies:
                    continue  # compared with the column it copies instead
                sign = 1 if row[i] > 0 else -1
                difference = np.abs(standardized[:, j] - sign * standardized[:, i]).max()
                if difference <= TOLERANCE and np.array_equal(gaps[i], gaps[j]):
                    copies[j] = (i, sign)
                    break
    return copies
