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

The sample is drawn once, here, from the classifier's own seed (``random_state``, which must
be an integer) and ``pool_sample``, and ``fit`` is handed it as that sample
(``fit(X, s, sampled_from=n)``): it draws nothing again, keeps every row given and asks whether
``s`` looks inverted of the whole table's counts. :class:`FittedPool` says for every pool row
whether it is in the fitted pool and where; the batches of this process (:func:`score_pool`)
and the partitions of a dask cluster (:mod:`puicl_model.files.dask_scoring`) both take their
rows from it and build their output through :func:`score_batch`. A fitted row is scored by its
position in the fitted pool, so that a row repeated in the table gets its own transductive
score in any batch, as in the whole pool scored in one piece; any other row is a new row
(:data:`~puicl_model.estimator.pool_sample.NEW_ROW`), scored as one without being looked for
in the fitted pool, whose score is the same bytes in a batch of any size
(:mod:`puicl_model.passes.query_rows`). The fitted table is the one ``fit`` builds from the
whole table in memory, so the scores are those of
``PUICLClassifier(...).fit(X, s).predict_proba(pool)``, whatever ``batch_rows``
(docs/classifier.md, "Large tables"), except for rows that equal another pool row, which
``predict_proba`` matches by their values: a sampled row repeated within the sample gets its
own score where ``predict_proba`` gives it the first copy's, and a row left out of the sample
that equals a sampled row gets a new row's score where ``predict_proba`` gives it that sampled
row's.

Whether progress bars show is decided once, by whoever builds the classifier (``puicl
predict``: on a terminal, unless ``--no-progress``), and handed down in its ``progress``: the
fit's bars and the bar over the pool's rows read it
(:func:`puicl_model.passes.phases.shows_progress`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from puicl_model.estimator.identifiers import IdentifierWarning
from puicl_model.estimator.input_checks import check_pu_labels, check_settings
from puicl_model.estimator.pool_sample import NEW_ROW, sampled_pool_rows
from puicl_model.files.table_io import TableError, TableScan, read_batches, scan_table

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier

__all__ = ["DEFAULT_BATCH_ROWS", "FittedPool", "PUInput", "PoolBatch", "bound_process_memory",
           "fit_on_input", "fitted_rows", "open_input", "output_frame", "pool_batches",
           "pool_progress", "rows_between", "score_batch", "score_pool", "write_scores"]

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


def rows_between(rows: np.ndarray, first: int, stop: int) -> slice:
    """Where in the sorted positions ``rows`` those in ``[first, stop)`` are."""
    return slice(int(np.searchsorted(rows, first)), int(np.searchsorted(rows, stop)))


def _gather(scan: TableScan, rows: np.ndarray, columns: list[str],
            batch_rows: int) -> pd.DataFrame:
    """The rows at positions ``rows`` (sorted) of ``scan``'s file, in that order."""
    parts = []
    for batch in read_batches(scan, batch_rows):
        inside = rows[rows_between(rows, batch.index[0], batch.index[-1] + 1)]
        if len(inside):
            parts.append(batch.loc[inside, columns])
    return pd.concat(parts)


@dataclass(frozen=True)
class PoolBatch:
    """The pool rows among the file rows ``[first, stop)`` of the pool's file: what one batch
    (or one dask partition) scores."""

    first: int
    pool: slice  # their indices among the pool rows (0 = the file's first unlabeled row)
    rows: np.ndarray  # their positions in the file (``row`` of the output)
    positions: np.ndarray  # their rows in the fitted pool (``x_pool_``), NEW_ROW outside it


@dataclass(frozen=True)
class FittedPool:
    """Which pool rows of ``source`` the classifier is fitted on: the seeded sample drawn once
    (:func:`puicl_model.estimator.pool_sample.sampled_pool_rows`), and so where each pool row
    sits in the fitted pool. Every reader of the pool takes its batches from here, so that the
    batch path and the dask path score the same rows with the same positions."""

    source: PUInput
    kept: np.ndarray | None  # sorted indices among the pool rows of the sample; None: all

    @property
    def sampled(self) -> bool:
        return self.kept is not None

    @property
    def n_fitted(self) -> int:
        return len(self.source.pool_rows) if self.kept is None else len(self.kept)

    def batch(self, first: int, stop: int) -> PoolBatch:
        """The pool rows among the file rows ``[first, stop)``."""
        where = rows_between(self.source.pool_rows, first, stop)
        indices = np.arange(where.start, where.stop, dtype=np.int64)
        if self.kept is None:  # the fitted pool is the pool, in file order
            positions = indices
        else:  # the sample, in pool order: a row's place in it, if it is there
            at = np.searchsorted(self.kept, indices)
            inside = at < len(self.kept)
            inside[inside] = self.kept[at[inside]] == indices[inside]
            positions = np.where(inside, at, NEW_ROW).astype(np.int64)
        return PoolBatch(first, where, self.source.pool_rows[where].astype(np.int64), positions)


def fitted_rows(source: PUInput, pool_sample: int | None, entropy: int,
                batch_rows: int = DEFAULT_BATCH_ROWS,
                ) -> tuple[pd.DataFrame, np.ndarray, FittedPool]:
    """``(X, s, fitted)``: the table ``PUICLClassifier.fit`` is given, the labeled rows and
    the pool's seeded sample (random_state ``entropy``; the whole pool where it holds at most
    ``pool_sample`` rows), and which pool rows it holds. The one draw of the sample."""
    kept = sampled_pool_rows(len(source.pool_rows), pool_sample, entropy)
    fitted = FittedPool(source, kept)
    if kept is None and source.one_table:
        # the whole table, in file order, exactly as read in one piece
        rows = np.arange(source.labeled_scan.n_rows)
        X = _gather(source.labeled_scan, rows, source.features, batch_rows)
        s = np.zeros(len(rows), dtype=np.int64)
        s[source.labeled_rows] = 1
        return X.reset_index(drop=True), s, fitted
    pool = source.pool_rows if kept is None else source.pool_rows[kept]
    labeled = _gather(source.labeled_scan, source.labeled_rows, source.features, batch_rows)
    unlabeled = _gather(source.pool_scan, pool, source.features, batch_rows)
    X = pd.concat([labeled, unlabeled], ignore_index=True)
    s = np.r_[np.ones(len(labeled), np.int64), np.zeros(len(unlabeled), np.int64)]
    return X, s, fitted


def _fit_seed(classifier: PUICLClassifier) -> int:
    """The seed ``classifier``'s fit will draw from: its ``random_state``, which must be an
    integer here, as the pool's sample is drawn from it before ``fit`` runs."""
    check_settings(classifier)  # (a negative seed, a bad pool_sample: fit's own messages)
    seed = classifier.random_state  # an integer, or None, a RandomState or a Generator
    if not isinstance(seed, (int, np.integer)):
        raise ValueError(f"random_state must be an integer to fit on files (the pool's sample "
                         f"is drawn from it before fit), got {seed!r}")
    return int(seed)


def fit_on_input(classifier: PUICLClassifier, source: PUInput,
                 batch_rows: int = DEFAULT_BATCH_ROWS) -> FittedPool:
    """Read the fitted table of ``source`` (:func:`fitted_rows`, its sample drawn from the
    classifier's own seed and ``pool_sample``), fit ``classifier`` on it as that sample and
    score its pool, as one phase; the notes ``fit`` warns of are printed on stderr."""
    from puicl_model.passes.phases import phase

    seed = _fit_seed(classifier)
    X, s, fitted = fitted_rows(source, classifier.pool_sample, seed, batch_rows)
    n_pool = len(source.pool_rows)
    with phase(f"fitting on a {fitted.n_fitted:,}-row sample of the {n_pool:,} unlabeled rows"
               if fitted.sampled else f"fitting on the {fitted.n_fitted:,} unlabeled rows"):
        _fit(classifier, X, s, n_pool)  # (fit scores the fitted pool: one phase)
    return fitted


def _fit(classifier: PUICLClassifier, X: pd.DataFrame, s: np.ndarray, n_pool: int) -> None:
    """``classifier.fit`` on the sample of a pool of ``n_pool`` rows, its notes on stderr."""
    import sys
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        # the sample as it is (fit keeps every row, so a batch finds a row by its position),
        # and s's counts of the whole table for the inverted-labels check
        classifier.fit(X, s, sampled_from=n_pool)
    # columns read as numeric or dropped, and why: said on stderr, never silently
    n_fitted_pool = int((s == 0).sum())
    for warning in caught:
        if issubclass(warning.category, UserWarning):
            note = str(warning.message)
            if issubclass(warning.category, IdentifierWarning) and n_fitted_pool < n_pool:
                # (the counts are the fitted rows', not the file's: said so)
                note += (f"; the unlabeled ones a seeded sample of the input's {n_pool:,} "
                         "(--pool-sample)")
            print(f"puicl predict: note: {note}", file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)


def output_frame(rows: np.ndarray, positive: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """What ``puicl predict`` writes per row: its position in its file, P(y=1), its label."""
    return pd.DataFrame({"row": np.asarray(rows, dtype=np.int64),
                         "p_positive": np.asarray(positive, dtype=np.float64),
                         "label": np.asarray(labels, dtype=np.int64)})


def score_batch(classifier: PUICLClassifier, batch: PoolBatch, part: pd.DataFrame,
                features: list[str]) -> pd.DataFrame:
    """The output frame of ``batch``'s pool rows; ``part``: the file rows ``[batch.first,
    ...)`` in file order, as read (by this process or by a dask worker). Each row is scored
    by its fitted-pool position where it has one (``PUICLClassifier.predict_and_proba``), so
    a duplicated row gets its own score in any batch, and as a new row where it has none
    (``NEW_ROW``: it was left out of the sample, so nothing is looked up by its values)."""
    if len(batch.rows) == 0:
        return output_frame(batch.rows, np.empty(0), batch.rows)
    X = part.iloc[batch.rows - batch.first][features].reset_index(drop=True)
    proba, labels = classifier.predict_and_proba(X, pool_rows=batch.positions)
    return output_frame(batch.rows, proba[:, 1], labels)


def pool_batches(fitted: FittedPool, batch_rows: int = DEFAULT_BATCH_ROWS,
                 ) -> Iterator[tuple[PoolBatch, pd.DataFrame]]:
    """The pool's batches holding pool rows, in file order, each with its file rows as read."""
    for part in read_batches(fitted.source.pool_scan, batch_rows):
        batch = fitted.batch(int(part.index[0]), int(part.index[-1]) + 1)
        if len(batch.rows):
            yield batch, part


def pool_progress(source: PUInput, progress: bool | None, desc: str = "puicl predict") -> Any:
    """A tqdm bar over the pool rows of ``source`` as their scores are written; ``progress``:
    the classifier's, the decision handed down
    (:func:`puicl_model.passes.phases.shows_progress`)."""
    from tqdm.auto import tqdm

    from puicl_model.passes.phases import shows_progress

    return tqdm(total=len(source.pool_rows), unit="row", desc=desc,
                disable=not shows_progress(progress), unit_scale=True, leave=False)


def score_pool(classifier: PUICLClassifier, fitted: FittedPool,
               write: Callable[[pd.DataFrame], None], batch_rows: int = DEFAULT_BATCH_ROWS,
               ) -> int:
    """Score every pool row with the fitted ``classifier``, ``write`` a frame of ``row``,
    ``p_positive`` and ``label`` per batch; returns the rows predicted negative. Each batch
    is a phase (:mod:`puicl_model.passes.phases`) named on the bar, which moves as the batch's
    rows are scored, not only once they are written: the one bar while a batch is scored. It
    shows as the classifier's ``progress`` says."""
    from puicl_model.passes.phases import phase

    source = fitted.source
    negative = 0
    with pool_progress(source, classifier.progress) as bar:
        for number, (batch, part) in enumerate(pool_batches(fitted, batch_rows), start=1):
            name = (f"scoring batch {number} (pool rows {batch.pool.start + 1:,}-"
                    f"{batch.pool.stop:,} of {len(source.pool_rows):,})")
            bar.set_description_str(f"puicl predict: {name}", refresh=False)
            moved = _bar_mover(bar, batch.pool.start, len(batch.rows))
            with phase(name, moved):
                scores = score_batch(classifier, batch, part, source.features)
            negative += write_scores(scores, write)
            moved(1.0)
    return negative


def write_scores(scores: pd.DataFrame, write: Callable[[pd.DataFrame], None]) -> int:
    """``write`` a batch's output frame; returns its rows predicted negative."""
    write(scores)
    return int((scores["label"] == 0).sum())


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
