"""Reading a user's table column by column: numbers, numbers written as text, missing-value
tokens, categories (the input side of :mod:`puicl_model.estimator.preprocessing`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["MISSING_TOKENS", "as_numeric", "is_dataframe", "is_missing", "moment_columns",
           "moments_in_seconds",
           "numbers_and_text", "parse_numeric", "read_columns"]

# Text that stands for a missing value in the tables people export (compared lower-cased and
# stripped). pandas' read_csv already reads most of them as NaN, but not "?" or "-".
MISSING_TOKENS = frozenset({
    "", "?", "-", "--", ".", "na", "n/a", "#n/a", "#na", "<na>", "nan", "-nan", "null",
    "none", "nil", "missing",
})


def is_dataframe(X: Any) -> bool:
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def is_missing(values: np.ndarray) -> np.ndarray:
    import pandas as pd

    return np.asarray(pd.isna(values), dtype=bool)


def read_columns(X: Any, unit_free_seconds: bool = True,
                 ) -> tuple[list[str], list[np.ndarray], bool, set[str]]:
    """Column names, per-column arrays, whether X is a DataFrame, and the columns whose
    dtype declares them categorical. ``unit_free_seconds``: dates and durations as seconds
    that do not depend on the column's unit (:func:`moments_in_seconds`); False: as pandas
    computes them in the column's own unit, as classifiers fitted before read them."""
    if is_dataframe(X):
        import pandas as pd

        names = [str(c) for c in X.columns]
        if len(set(names)) != len(names):
            raise ValueError("X has duplicate column names; give every column a unique name")
        arrays = []
        declared = set()  # columns whose dtype says "categorical", whatever their values
        for column in X.columns:
            series = X[column]
            if pd.api.types.is_complex_dtype(series.dtype):
                raise ValueError(f"column {column!r} holds complex numbers, which are not "
                                 "supported; pass real numbers or strings")
            moments = moments_in_seconds(series, unit_free_seconds)
            if moments is not None:
                arrays.append(moments)
                continue
            if isinstance(series.dtype, pd.CategoricalDtype) or not (
                pd.api.types.is_numeric_dtype(series.dtype)
                and not pd.api.types.is_bool_dtype(series.dtype)
            ):
                # text (object, or pandas' string dtypes, which read_csv gives a column
                # with one stray "?") may still hold numbers; a category dtype is declared
                if not (pd.api.types.is_object_dtype(series.dtype)
                        or pd.api.types.is_string_dtype(series.dtype)):
                    declared.add(str(column))
                arrays.append(series.astype(object).to_numpy())
            elif series.dtype.kind in "iu" and integer_offset(series.to_numpy()):
                arrays.append(series.to_numpy())  # integers float64 cannot hold: kept exact
            else:
                arrays.append(series.to_numpy(dtype=np.float64, na_value=np.nan))
        return names, arrays, True, declared
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("Sparse data was passed for X, but dense data is required (sparse "
                        "input is not supported); convert it with X.toarray()")
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(
            f"X must be a 2-D table (rows × features), got an array of shape {array.shape}; "
            "Reshape your data: X.reshape(1, -1) for one row, X.reshape(-1, 1) for one "
            "feature"
        )
    if array.dtype.kind in "iu" and integer_offset(array.ravel()):
        # integers float64 cannot hold exactly: each column kept exact, read by parse_numeric
        names = [str(i) for i in range(array.shape[1])]
        return names, [array[:, i].copy() for i in range(array.shape[1])], False, set()
    if array.dtype.kind in "biuf":
        array = array.astype(np.float64, copy=False)
    elif array.dtype.kind == "c":
        raise ValueError("Complex data not supported; pass real numbers or strings")
    elif array.dtype.kind not in "OUS":
        raise ValueError(f"X has unsupported dtype {array.dtype}; pass numbers or strings")
    names = [str(i) for i in range(array.shape[1])]
    return names, [array[:, i] for i in range(array.shape[1])], False, set()


def _is_moment(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds dates, times, durations or periods."""
    import pandas as pd

    return (isinstance(dtype, pd.PeriodDtype) or pd.api.types.is_datetime64_any_dtype(dtype)
            or pd.api.types.is_timedelta64_dtype(dtype))


def moment_columns(X: Any) -> set[str]:
    """The names of the columns of the DataFrame ``X`` that hold dates, times, durations or
    periods (read as seconds by :func:`read_columns`); empty for any other table."""
    if not is_dataframe(X):
        return set()
    return {str(column) for column, dtype in X.dtypes.items() if _is_moment(dtype)}


def moments_in_seconds(series: Any, unit_free: bool = True) -> np.ndarray | None:
    """A date, time or duration column as float64 seconds (dates: since 1970-01-01 UTC; a
    period: its start; NaT: NaN), or None for any other column.

    Their order is what a model can use; read as text they would become one category per
    distinct date, or be dropped as an identifier when every date differs.

    ``unit_free``: the same seconds whatever unit the column holds its values in. pandas keeps
    a date in seconds, milliseconds, microseconds or nanoseconds (pandas 3 parses text to
    microseconds, pandas 2 to nanoseconds, a Parquet file keeps the unit it was written in),
    and pandas 2 reads seconds as the count divided by the unit's ticks per second: in
    nanoseconds the count of a date since 1970 is beyond float64's exact integers, so
    12:30:00.123 in nanoseconds and in microseconds give seconds a bit apart (a quarter of such
    values). Here the values are counted in microseconds wherever none has a finer part, and
    the whole seconds are added to the fraction (:func:`_seconds`; pandas 3.1 computes the
    same in any unit), so that one table read from a CSV and from a Parquet file gives the same
    bits. False: pandas' own seconds in the column's unit (classifiers fitted before, which
    must read their columns as they were fitted)."""
    import pandas as pd

    if not _is_moment(series.dtype):
        return None
    if isinstance(series.dtype, pd.PeriodDtype):
        series = series.dt.start_time
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        if getattr(series.dt, "tz", None) is not None:
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        series = series - pd.Timestamp("1970-01-01")
    if unit_free:
        return _seconds(series)
    return series.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan)


_MICROSECONDS = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _seconds(durations: Any) -> np.ndarray:
    """``durations`` (timedelta64) in seconds, the same in every unit: whole seconds plus the
    microseconds' fraction, both exact; pandas' own where a value has a finer part than a
    microsecond (only nanoseconds hold one) or lies beyond float64's exact microseconds (the
    year 2255)."""
    present = durations.notna().to_numpy()
    ticks = durations.to_numpy().view(np.int64)  # (NaT: the least int64, masked below)
    unit = durations.dt.unit
    if unit == "ns" and not np.any(ticks[present] % 1000):
        micro = ticks // 1000
    elif unit in _MICROSECONDS and not np.any(
            np.abs(ticks[present]) > 2**53 // _MICROSECONDS[unit]):
        micro = ticks * _MICROSECONDS[unit]
    else:  # (finer than microseconds, or beyond float64's exact ones)
        micro = None
    if micro is None or np.any(np.abs(micro[present]) > 2**53):
        return durations.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan)
    whole, rest = np.divmod(micro, 1_000_000)
    seconds = whole + rest / 1e6
    seconds[~present] = np.nan
    return seconds


def as_numeric(values: np.ndarray, offset: int = 0) -> np.ndarray | None:
    """``values`` as float64 when every non-missing entry is a number, a number written as
    text, or a missing-value token (read as NaN); else None. ``offset``: see
    :func:`parse_numeric`."""
    return parse_numeric(values, offset)[0]


# integers beyond this magnitude are not all exact in float64 (53-bit mantissa)
_EXACT_IN_FLOAT64 = 2**53


def integer_offset(values: np.ndarray) -> int:
    """What to subtract from an integer column before it becomes float64: its smallest value
    where some value is too large for float64 to hold exactly (IDs near 2**60, say), so that
    values differing only beyond float64's precision stay distinct; else 0 (the column is
    converted as it is). The encodings (ranks, standardization) do not depend on where a
    column starts."""
    if values.dtype.kind not in "iu" or not len(values):
        return 0
    if int(values.max()) < _EXACT_IN_FLOAT64 and int(values.min()) > -_EXACT_IN_FLOAT64:
        return 0
    return int(values.min())

def parse_numeric(values: np.ndarray, offset: int = 0,
                  ) -> tuple[np.ndarray | None, dict[str, int]]:
    """(``as_numeric(values)``, count of each missing-value token found in the text); an
    integer column less ``offset`` (:func:`integer_offset`), in integer arithmetic."""
    if values.dtype.kind == "f":
        return values, {}
    if values.dtype.kind in "iu" and offset:
        return np.array([int(v) - offset for v in values.tolist()], dtype=np.float64), {}
    if values.dtype.kind in "biu":
        return values.astype(np.float64), {}
    missing = is_missing(values)
    result = np.full(values.shape, np.nan)
    tokens: dict[str, int] = {}
    for row in np.flatnonzero(~missing).tolist():
        value = values[row]
        if isinstance(value, (bool, np.bool_)):
            return None, {}
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if isinstance(value, str):
            if value.strip().lower() in MISSING_TOKENS:
                tokens[value] = tokens.get(value, 0) + 1
                continue
            try:
                number = float(value)
            except ValueError:
                return None, {}
            if math.isnan(number):  # "NaN" spelled in a way float() reads
                tokens[value] = tokens.get(value, 0) + 1
                continue
            result[row] = number
            continue
        try:
            result[row] = float(value)
        except (TypeError, ValueError):
            return None, {}
    return result, tokens


def numbers_and_text(values: np.ndarray) -> tuple[float, dict[str, int]]:
    """For a column that :func:`parse_numeric` does not read as numeric: the share of its
    present entries (missing values and missing-value tokens left out) that are numbers or
    numbers written as text, and the count of each other entry, by its text."""
    import pandas as pd

    present = values[~is_missing(values)]
    present = present[[not (isinstance(v, str) and v.strip().lower() in MISSING_TOKENS)
                       for v in present.tolist()]]
    if len(present) == 0:
        return 0.0, {}
    parsed = pd.to_numeric(pd.Series(present, dtype=object), errors="coerce").notna()
    # True and False would read as 1 and 0, but a column holding them is not one of amounts
    numbers = parsed.to_numpy() & np.array([not isinstance(v, (bool, np.bool_))
                                            for v in present.tolist()])
    text: dict[str, int] = {}
    for value in present[~numbers].tolist():
        text[str(value)] = text.get(str(value), 0) + 1
    return float(numbers.mean()), text
