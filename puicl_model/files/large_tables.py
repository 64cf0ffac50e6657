"""Scoring a PU table from files, a batch of rows at a time: what ``puicl predict`` runs.

The table is one file with a 0/1 label column, or a file of labeled positives and a file of
unlabeled rows, in CSV or Parquet (:mod:`puicl_model.files.table_io`). Three reads, each a batch at
a time, keep memory bounded by the batch and the fitted table, not the pool:

1. the scan (:func:`puicl_model.files.table_io.scan_table`): the label column, the row count and
   what each column holds;
2. the fitted table: the labeled rows, and the pool itself where it holds at most
   ``pool_sample`` rows, else the pool's seeded sample
   (:func:`puicl_model.estimator.pool_sample.sampled_pool_rows`, drawn from the seed and the pool's
   size alone), gathered in file order; :class:`~puicl_model.estimator.classifier.PUICLClassifier`
   is fitted on it once;
3. the pool, scored batch by batch (:meth:`PUICLClassifier.predict_and_proba
   <puicl_model.estimator.classifier.PUICLClassifier.predict_and_proba>`) and written as it goes.

A row's score is the same bytes in a batch of any size (:mod:`puicl_model.passes.query_rows`), and
the fitted table is the one ``fit`` builds from the whole table in memory, so the scores are those
of ``PUICLClassifier(...).fit(X, s).predict_proba(pool)``, whatever ``batch_rows``
(docs/classifier.md, "Large tables").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from puicl_model.estimator.input_checks import check_pu_labels
from puicl_model.estimator.pool_sample import sampled_pool_rows
from puicl_model.files.table_io import TableError, TableScan, read_batches, scan_table

__all__ = ["DEFAULT_BATCH_ROWS", "PUInput", "bound_process_memory", "fitted_rows", "open_input",
           "pool_batches", "pool_progress", "score_pool"]

# rows per batch: large enough that the contexts computed per batch (one per pool chunk of
# the fitted table, :mod:`puicl_model.passes.query_rows`) cost little beside the rows scored, small
# enough that a batch of a few dozen columns stays well under 100 MB
DEFAULT_BATCH_ROWS = 100_000


@dataclass
class PUInput:
    """Where a PU table's labeled rows and pool are, and which columns are its features."""

    labeled_scan: TableScan
    pool_scan: TableScan  # the same scan as labeled_scan for one table with a label column
    features: list[str]  # the feature columns, in the labeled table's order
    labeled_rows: np.ndarray  # positions of the labeled rows in labeled_scan's file
    pool_rows: np.ndarray  # positions of the unlabeled rows in pool_scan's file
    label_column: str | None = None  # the one table's label column

    @property
    def one_table(self) -> bool:
        return self.labeled_scan is self.pool_scan


def _one_table(path, label_column: str, batch_rows: int) -> tuple[TableScan, np.ndarray]:
    scan = scan_table(path, label_column, batch_rows)
    if label_column not in scan.columns:
        raise TableError(f"{path} has no column {label_column!r}; its columns are "
                         f"{scan.columns}")
    assert scan.label is not None
    if pd.isna(scan.label).any():
        raise TableError(f"column {label_column!r} has empty entries; mark every row 1 "
                         "(labeled positive) or 0 (unlabeled)")
    return scan, check_pu_labels(scan.label, scan.n_rows,
                                 name=f"column {label_column!r} (--label-column)")


def open_input(*, input_path=None, label_column: str | None = None, positives=None,
               unlabeled=None, drop_columns: Sequence[str] = (),
               batch_rows: int = DEFAULT_BATCH_ROWS) -> PUInput:
    """Scan the files of one of the two layouts, check them and name the feature columns."""
    one_table = input_path is not None or label_column is not None
    if one_table == (positives is not None or unlabeled is not None):
        raise TableError("give either --input with --label-column, or --positives with "
                         "--unlabeled")
    if one_table:
        if input_path is None or label_column is None:
            raise TableError("--input and --label-column go together")
        if label_column in drop_columns:
            raise TableError(f"--drop-columns: {label_column!r} is the label column "
                             "(--label-column); it is read as the label and cannot be dropped")
        scan, labeled = _one_table(input_path, label_column, batch_rows)
        labeled_scan = pool_scan = scan
        columns = [c for c in scan.columns if c != label_column]
        labeled_rows, pool_rows = np.flatnonzero(labeled), np.flatnonzero(~labeled)
        source, besides = str(input_path), [f"the label column {label_column!r}"]
    else:
        if positives is None or unlabeled is None:
            raise TableError("--positives and --unlabeled go together")
        labeled_scan = scan_table(positives, batch_rows=batch_rows)
        pool_scan = scan_table(unlabeled, batch_rows=batch_rows)
        # columns are matched by name: the same columns in another order are the same table
        lacking = [c for c in labeled_scan.columns if c not in pool_scan.columns]
        extra = [c for c in pool_scan.columns if c not in labeled_scan.columns]
        if lacking or extra:
            raise TableError(
                f"{positives} and {unlabeled} must have the same columns (in any order); "
                f"{unlabeled} " + "; ".join(
                    ([f"lacks {lacking}"] if lacking else [])
                    + ([f"has {extra}, which {positives} lacks"] if extra else [])))
        columns = list(labeled_scan.columns)
        labeled_rows = np.arange(labeled_scan.n_rows)
        pool_rows = np.arange(pool_scan.n_rows)
        check_pu_labels(np.r_[np.ones(len(labeled_rows)), np.zeros(len(pool_rows))],
                        len(labeled_rows) + len(pool_rows))
        source, besides = f"{positives} and {unlabeled}", []
    saved_index = labeled_scan.saved_index + (pool_scan.saved_index if not one_table else [])
    # a saved index named here (as users did before it was left out) is gone already
    missing = [c for c in drop_columns if c not in columns and c not in saved_index]
    if missing:
        raise TableError(f"--drop-columns: no such column(s) {missing}")
    dropped = [c for c in drop_columns if c in columns]
    features = [c for c in columns if c not in dropped]
    if not features:
        # said here, in the table's terms, rather than as the classifier's "X has 0 features"
        besides += (([f"a saved index {saved_index}"] if saved_index else [])
                    + ([f"--drop-columns {dropped}"] if dropped else []))
        raise TableError(f"{source} has no feature columns"
                         + (" besides " + " and ".join(besides) if besides else ""))
    return PUInput(labeled_scan, pool_scan, features, labeled_rows, pool_rows,
                   label_column if one_table else None)


def bound_process_memory() -> None:
    """Let this process give freed memory back while it scores a pool batch by batch.

    Two allocators otherwise keep what they freed: pyarrow's default pool (mimalloc) keeps the
    pages of every batch read, and glibc's malloc, once a large block has been freed, serves
    blocks of up to 32 MB from its heap, which the query path's per-context tensors of a few
    MB fragment. Reading through the system allocator and serving blocks of 4 MB or more by
    ``mmap`` (returned on free) keeps the peak near that of one batch (measured in
    docs/classifier.md, "Large tables"). A no-op where glibc is not the C library."""
    import ctypes

    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_mmap_threshold = -3  # glibc's mallopt parameter (malloc.h)
    libc.mallopt(m_mmap_threshold, 4 << 20)


def _gather(scan: TableScan, rows: np.ndarray, columns: list[str],
            batch_rows: int) -> pd.DataFrame:
    """The rows at positions ``rows`` (sorted) of ``scan``'s file, in that order."""
    parts = []
    for batch in read_batches(scan, batch_rows):
        first, stop = batch.index[0], batch.index[-1] + 1
        inside = rows[np.searchsorted(rows, first):np.searchsorted(rows, stop)]
        if len(inside):
            parts.append(batch.loc[inside, columns])
    return pd.concat(parts)


def fitted_rows(source: PUInput, pool_sample: int | None, entropy: int,
                batch_rows: int = DEFAULT_BATCH_ROWS) -> tuple[pd.DataFrame, np.ndarray, bool]:
    """``(X, s, sampled)``: the table ``PUICLClassifier.fit`` is given, as ``fit`` would
    reduce the whole table (random_state ``entropy``), and whether the pool was sampled."""
    kept = sampled_pool_rows(len(source.pool_rows), pool_sample, entropy)
    if kept is None and source.one_table:
        # the whole table, in file order, exactly as read in one piece
        rows = np.arange(source.labeled_scan.n_rows)
        X = _gather(source.labeled_scan, rows, source.features, batch_rows)
        s = np.zeros(len(rows), dtype=np.int64)
        s[source.labeled_rows] = 1
        return X.reset_index(drop=True), s, False
    pool = source.pool_rows if kept is None else source.pool_rows[kept]
    labeled = _gather(source.labeled_scan, source.labeled_rows, source.features, batch_rows)
    unlabeled = _gather(source.pool_scan, pool, source.features, batch_rows)
    X = pd.concat([labeled, unlabeled], ignore_index=True)
    s = np.r_[np.ones(len(labeled), np.int64), np.zeros(len(unlabeled), np.int64)]
    return X, s, kept is not None


def pool_batches(source: PUInput, batch_rows: int = DEFAULT_BATCH_ROWS,
                 ) -> Iterator[tuple[np.ndarray, pd.DataFrame]]:
    """``(positions, features)`` of the pool's rows, a batch at a time, in file order:
    positions in the pool's file (``row`` of the output)."""
    for batch in read_batches(source.pool_scan, batch_rows):
        if source.one_table:
            first, stop = batch.index[0], batch.index[-1] + 1
            rows = source.pool_rows[np.searchsorted(source.pool_rows, first):
                                    np.searchsorted(source.pool_rows, stop)]
            batch = batch.loc[rows]
        if len(batch):
            yield batch.index.to_numpy(), batch[source.features].reset_index(drop=True)


def pool_progress(source: PUInput, progress: bool | None, desc: str = "puicl predict") -> Any:
    """A tqdm bar over the pool rows of ``source`` as their scores are written (``progress``
    None: on a terminal only)."""
    import sys

    from tqdm.auto import tqdm

    show = progress if progress is not None else sys.stderr.isatty()
    return tqdm(total=len(source.pool_rows), unit="row", desc=desc, disable=not show,
                unit_scale=True, leave=False)


def score_pool(classifier, source: PUInput, write: Callable[[pd.DataFrame], None],
               batch_rows: int = DEFAULT_BATCH_ROWS, progress: bool | None = None) -> int:
    """Score every pool row with the fitted ``classifier``, ``write`` a frame of ``row``,
    ``p_positive`` and ``label`` per batch; returns the rows predicted negative. Each batch
    is a phase (:mod:`puicl_model.passes.phases`) named on the bar, which moves as the batch's rows
    are scored, not only once they are written."""
    from puicl_model.passes.phases import phase

    negative = written = 0
    with pool_progress(source, progress) as bar:
        for number, (rows, features) in enumerate(pool_batches(source, batch_rows), start=1):
            name = (f"scoring batch {number} (pool rows {written + 1:,}-{written + len(rows):,} "
                    f"of {len(source.pool_rows):,})")
            bar.set_description_str(f"puicl predict: {name}", refresh=False)
            moved = _bar_mover(bar, written, len(rows))
            with phase(name, moved):
                proba, labels = classifier.predict_and_proba(features)
            write(pd.DataFrame({"row": rows.astype(np.int64), "p_positive": proba[:, 1],
                                "label": labels}))
            negative += int((labels == 0).sum())
            written += len(rows)
            moved(1.0)
    return negative


def _bar_mover(bar: Any, start: int, rows: int) -> Callable[[float], None]:
    """Moves ``bar`` to ``start`` plus the share of a batch of ``rows`` rows that is done."""
    shown = start

    def move(share: float) -> None:
        nonlocal shown
        target = start + int(share * rows)
        if target > shown:
            bar.update(target - shown)
            shown = target

    return move
