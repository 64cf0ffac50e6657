"""Tables read and written in row batches: CSV and Parquet, chosen by the file's extension.

``puicl predict`` reads its input through :func:`scan_table` (once, for what must be known of
the whole file before any row is scored) and :func:`read_batches` (the rows, a batch at a
time, in file order), and writes its scores through :class:`BatchWriter`, so that its memory
is bounded by the batch, not the table:

* **Parquet** (a name ending in ``.parquet`` or ``.pq``; read and written with pyarrow)
  keeps the columns' types: a dictionary-encoded (categorical) column arrives as a pandas
  ``category`` column, whatever values each batch holds.
* **CSV** (any other name) has no types, and pandas infers them per batch: a column of
  numbers with one stray word in a later batch would be numbers in one batch and text in
  another, and one of True/False with "maybe" further down booleans in one batch and text in
  another. The scan records what each column holds in every batch, and
  :func:`decide_csv_type` (the one place a CSV column's type is decided) gives it the type
  pandas infers when it reads the whole column at once (``pandas.read_csv(path,
  low_memory=False)``); every later read, in batches here or by dask's workers
  (:mod:`puicl_model.files.dask_scoring`), passes those types (:func:`csv_read_options`,
  :func:`restore_csv_types`), so every batch holds the values one read of the file gives. A
  column of text is read as numbers or dates where its cells are, by the classifier's own
  rule (:mod:`puicl_model.estimator.text_readings`) decided on every row of the file: ISO 8601
  dates become a date column (as a Parquet file's), and in a column of numbers the few cells
  that are not numbers become missing, said in one line that counts the file's cells. The
  scan also finds a saved index (an unnamed column of distinct whole numbers, what
  ``DataFrame.to_csv()`` writes), which is row numbering, not a feature.

An input must be a regular file: it is read more than once, which a named pipe, a device or a
process substitution (``<(...)``) cannot give, and a device such as ``/dev/zero`` never ends.

A failed read names the file and the reason in one line (:class:`TableError`). A write goes to
a temporary file renamed over the output only once every batch is written, so a crash leaves
no half-written output (:mod:`puicl_common.atomic`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from puicl_common.atomic import atomic_output
from puicl_model.estimator.text_readings import (
    DATE_READINGS,
    DATES,
    NUMBERS,
    ZONED_DATES,
    TextTally,
    numbers_left_as_text,
    text_as_datetimes,
)

__all__ = ["CSV_TYPES", "PARQUET_SUFFIXES", "BatchWriter", "TableError", "TableScan",
           "csv_read_options", "decide_csv_type", "read_batches", "restore_csv_types",
           "scan_table", "table_format"]

PARQUET_SUFFIXES = (".parquet", ".pq")


class TableError(ValueError):
    """A table that cannot be read or written as asked (one line, naming the file)."""


def table_format(path: Path | str) -> str:
    """``"parquet"`` for a name ending in ``.parquet`` or ``.pq``, else ``"csv"``."""
    return "parquet" if Path(path).suffix.lower() in PARQUET_SUFFIXES else "csv"


@dataclass
class TableScan:
    """What is known of a whole table before its rows are read in batches."""

    path: Path
    format: str
    columns: list[str]  # in file order, the saved index left out
    n_rows: int
    saved_index: list[str] = field(default_factory=list)
    # CSV: every column's type (CSV_TYPES), the saved index and the label column included
    csv_types: dict[str, str] = field(default_factory=dict)
    label: np.ndarray | None = None  # the label column's values, where one was asked for
    multiline_cells: bool = False  # CSV: a quoted cell holds a line break


# A CSV column's types, each what pandas infers reading the whole column at once, and how a
# read is told it: pandas has no dtype for "True/False with blanks" (an object column of
# bools and NaN), so such a column is read as pandas' nullable booleans and turned back
# (:func:`restore_csv_types`)
CSV_TYPES: dict[str, Any] = {"int": "int64", "uint": "uint64", "float": "float64",
                             "bool": "bool", "bool+missing": "boolean", "text": str,
                             # text read as numbers or dates (text_readings), its other
                             # cells as missing: read as text, then turned
                             "numbers+text": str, DATES: str, ZONED_DATES: str}


def _batch_kind(values: pd.Series) -> str:
    """What one batch of a CSV column holds, as pandas read it: ``int`` (with ``negint``
    where a value is negative), ``uint``, ``float``, ``empty`` (every cell missing),
    ``bool``, ``bool+missing`` or ``text``."""
    kind = values.dtype.kind
    if kind == "i":
        return "negint" if bool((values < 0).any()) else "int"
    if kind == "u":
        return "uint"
    if kind == "f":
        return "empty" if bool(values.isna().all()) else "float"
    if kind == "b":
        return "bool"
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) == "boolean":
        return "bool+missing"
    return "text"


def decide_csv_type(kinds: set[str]) -> str:
    """The type (a key of :data:`CSV_TYPES`) of a CSV column whose batches held ``kinds``
    (:func:`_batch_kind`): the one pandas infers reading the whole column at once, which
    tries whole numbers, then decimals, then True/False, then keeps the text."""
    booleans = kinds & {"bool", "bool+missing"}
    numbers = kinds & {"int", "negint", "uint", "float"}
    if "text" in kinds or (booleans and numbers):
        return "text"  # e.g. True/False and 1/0: neither all numbers nor all booleans
    if booleans:
        return "bool" if kinds == {"bool"} else "bool+missing"
    if kinds <= {"int", "negint"}:
        return "int"
    if kinds <= {"int", "uint"}:
        return "uint"
    if "uint" in kinds and "negint" in kinds and kinds <= {"int", "negint", "uint"}:
        return "text"  # beyond int64 and below 0: pandas keeps the text
    return "float"  # decimals, missing cells (NaN) among whole numbers, or every cell missing


def csv_read_options(types: dict[str, str]) -> dict[str, Any]:
    """The ``pandas.read_csv`` arguments that read columns with the ``types`` a scan decided
    (``TableScan.csv_types``; also given to dask's ``read_csv``)."""
    return {"dtype": {column: CSV_TYPES[kind] for column, kind in types.items()}}


def restore_csv_types(frame: pd.DataFrame, types: dict[str, str]) -> pd.DataFrame:
    """``frame``, read with :func:`csv_read_options` ``(types)``, with the values one read of
    the whole file gives: a column of True/False with blanks holds bools and NaN (an object
    column), not pandas' nullable booleans."""
    for column, kind in types.items():
        if column not in frame.columns:
            continue
        if kind == "bool+missing":
            values = frame[column]
            frame[column] = values.astype(object).where(values.notna(), np.nan)
        elif kind == "numbers+text":
            frame[column] = pd.Series(numbers_left_as_text(frame[column].to_numpy(object)),
                                      index=frame.index, dtype=object)
        elif kind in DATE_READINGS:
            dates = text_as_datetimes(frame[column].to_numpy(object), kind)[0]
            frame[column] = dates.set_axis(frame.index)
    return frame


def _tally(tally: TextTally, values: pd.Series, kind: str) -> None:
    """Count a batch of a CSV column's cells (:class:`TextTally`) as pandas read them."""
    if kind == "text":
        tally.add(values.to_numpy(object))
    elif kind in ("int", "negint", "uint", "float"):
        tally.add_numbers(int(values.notna().sum()))
    elif kind in ("bool", "bool+missing"):
        tally.add_others(values.dropna().tolist())


def _text_reading(path: Path, column: str, tally: TextTally) -> str:
    """The type of a CSV column of text (:data:`CSV_TYPES`), read as numbers or dates where
    its cells are (:mod:`puicl_model.estimator.text_readings`, as the classifier reads a text
    column), with a note on stderr counting the file's cells it reads as missing."""
    reading = tally.reading()
    note = f"puicl predict: note: {path}: column {column!r}"
    if reading is None:
        # (text that looks like dates reaches the classifier as text, whose note says why it
        # is not read as dates, once)
        return "text"
    strays = tally.strays(reading)
    if reading == NUMBERS:
        if not strays:
            return "text"  # numbers and missing-value tokens: the classifier reads them
        print(f"{note} is read as numeric, the cells that are not numbers as missing values: "
              f"{tally.stray_note(NUMBERS)}", file=sys.stderr)
        return "numbers+text"
    print(f"{note} is read as dates (ISO 8601" + (", with a time zone, in UTC"
                                                  if reading == ZONED_DATES else "") + ")"
          + (f", the cells that are not dates as missing values: {tally.stray_note(reading)}"
             if strays else ""), file=sys.stderr)
    return reading


def _csv_header(path: Path) -> list[str]:
    # the header as written: pandas renames a repeated name (a, a.1) and an empty one
    # (Unnamed: N), hiding both; the same parser reads both, so the cells line up
    header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    return [str(name) for name in header.iloc[0]] if len(header) else []


def _scan_csv(path: Path, label_column: str | None, batch_rows: int) -> TableScan:
    names = _csv_header(path)
    repeated = sorted(name for name, count in Counter(names).items() if name and count > 1)
    if repeated:
        raise TableError(f"{path} has duplicate column names {repeated}; give each column its "
                         "own name")
    columns: list[str] | None = None
    kinds: dict[str, set[str]] = {}
    tallies: dict[str, TextTally] = {}  # what each column's cells are, for text's readings
    unnamed: dict[str, list[np.ndarray]] = {}
    labels: list[np.ndarray] = []
    n_rows = 0
    multiline = any("\n" in name or "\r" in name for name in names)
    # low_memory=False: each batch's types from the whole batch, not from pieces of it
    for batch in pd.read_csv(path, chunksize=batch_rows, low_memory=False):
        if columns is None:
            columns = [str(c) for c in batch.columns]
            if len(names) == len(columns):  # the two reads agree unless the file is ragged
                unnamed = {c: [] for n, c in zip(names, columns, strict=True)
                           if n == "" and c != label_column}
        for column in columns:
            kind = _batch_kind(batch[column])
            kinds.setdefault(column, set()).add(kind)
            if column != label_column:
                _tally(tallies.setdefault(column, TextTally()), batch[column], kind)
            if kind == "text" and not multiline:  # (dask's reader splits files at line breaks)
                multiline = bool(batch[column].astype(str).str.contains("[\r\n]").any())
        for column, parts in unnamed.items():
            parts.append(batch[column].to_numpy())
        if label_column is not None and label_column in batch.columns:
            labels.append(batch[label_column].to_numpy())
        n_rows += len(batch)
    if columns is None or n_rows == 0:
        raise TableError(f"{path} has no data rows")
    types = {column: decide_csv_type(kinds[column]) for column in columns}
    for column in columns:
        if types[column] == "text" and column in tallies:
            types[column] = _text_reading(path, column, tallies[column])
    saved_index = []
    for position, column in enumerate(columns):
        if column in unnamed and types[column] in ("int", "uint"):
            values = np.concatenate(unnamed[column])
            if len(np.unique(values)) == len(values):
                saved_index.append(column)
                print(f"puicl predict: note: {path}: column {position + 1} has no header and "
                      "holds distinct whole numbers: a saved index; not used as a feature",
                      file=sys.stderr)
    label = np.concatenate(labels) if labels else None
    return TableScan(path, "csv", [c for c in columns if c not in saved_index], n_rows,
                     saved_index, types, label, multiline)


def _scan_parquet(path: Path, label_column: str | None) -> TableScan:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    # columns pandas restores as the index (to_parquet's) are not features
    # (a RangeIndex is stored as a description, a dict, not as a column)
    metadata = file.schema_arrow.pandas_metadata or {}
    index = {name for name in metadata.get("index_columns", []) if isinstance(name, str)}
    columns = [name for name in file.schema_arrow.names if name not in index]
    repeated = sorted(name for name, count in Counter(columns).items() if count > 1)
    if repeated:
        raise TableError(f"{path} has duplicate column names {repeated}; give each column its "
                         "own name")
    n_rows = file.metadata.num_rows
    if n_rows == 0:
        raise TableError(f"{path} has no data rows")
    label = None
    if label_column is not None and label_column in columns:
        label = file.read(columns=[label_column]).column(0).to_pandas().to_numpy()
    return TableScan(path, "parquet", columns, n_rows, label=label)


def _check_regular_file(path: Path) -> None:
    """Refuse an input that is not a regular file, before anything reads it."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise TableError(f"input file not found: {path}") from None
    except OSError as err:
        raise TableError(f"cannot read {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(status.st_mode):
        raise TableError(f"{path} is a directory; give the path of a CSV or Parquet file")
    if not stat.S_ISREG(status.st_mode):
        raise TableError(f"{path} is not a regular file (a named pipe, a device or a process "
                         "substitution?): the table is read more than once; save it to a file "
                         "and give that")


def scan_table(path: Path, label_column: str | None = None,
               batch_rows: int = 100_000) -> TableScan:
    """Scan the table ``path``, keeping ``label_column``'s values."""
    kind = table_format(path)
    _check_regular_file(path)
    try:
        if kind == "csv":
            return _scan_csv(path, label_column, batch_rows)
        return _scan_parquet(path, label_column)
    except FileNotFoundError:
        raise TableError(f"input file not found: {path}") from None
    except TableError:
        raise
    except (OSError, ValueError) as err:  # pandas' and pyarrow's parser errors are ValueErrors
        raise TableError(f"cannot read {path} as {kind.upper()}: {err}") from None


def read_batches(scan: TableScan, batch_rows: int) -> Iterator[pd.DataFrame]:
    """The table's rows in batches of ``batch_rows`` (the last shorter), in file order, each
    indexed by its rows' 0-based positions in the file."""
    start = 0
    try:
        if scan.format == "csv":
            batches: Any = (restore_csv_types(batch, scan.csv_types) for batch in
                            pd.read_csv(scan.path, chunksize=batch_rows,
                                        **csv_read_options(scan.csv_types)))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            # pre-buffering keeps every column chunk it read for the reader's lifetime: memory
            # would grow with the file
            file = pq.ParquetFile(scan.path, pre_buffer=False)
            batches = (pa.Table.from_batches([part]).to_pandas()
                       for part in file.iter_batches(batch_size=batch_rows,
                                                     columns=scan.columns))
        for batch in batches:
            batch = batch.drop(columns=scan.saved_index)
            batch.index = pd.RangeIndex(start, start + len(batch))
            start += len(batch)
            yield batch
    except (OSError, ValueError) as err:
        raise TableError(f"cannot read {scan.path}: {err}") from None
    if start != scan.n_rows:
        raise TableError(f"{scan.path} changed while it was read ({scan.n_rows} rows, then "
                         f"{start})")


class BatchWriter:
    """Writes a table batch by batch to ``path`` (CSV or Parquet by its extension; ``-``:
    CSV on standard output), atomically: :meth:`open` is a context manager that renames the
    finished file into place on success and removes it on any failure. ``float_format``
    None writes each float in full, the shortest text that reads back as the same float."""

    def __init__(self, path: str, float_format: str | None = None) -> None:
        self.path = path
        self.format = "csv" if path == "-" else table_format(path)
        self.float_format = float_format
        self.rows = 0
        self._target: Any = None
        self._parquet: Any = None

    @contextlib.contextmanager
    def open(self) -> Iterator[BatchWriter]:
        if self.path == "-":
            self._target = sys.stdout
            yield self
            return
        suffix = Path(self.path).suffix
        with atomic_output(self.path, suffix=suffix) as temporary:
            self._target = temporary
            try:
                yield self
            finally:
                if self._parquet is not None:
                    self._parquet.close()

    def write(self, frame: pd.DataFrame) -> None:
        if self.format == "csv":
            header = self.rows == 0
            if self.path == "-":
                frame.to_csv(sys.stdout, index=False, header=header,
                             float_format=self.float_format)
            else:
                frame.to_csv(self._target, index=False, header=header, mode="w" if header
                             else "a", float_format=self.float_format)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(frame, preserve_index=False)
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self._target, table.schema)
            self._parquet.write_table(table)
        self.rows += len(frame)
