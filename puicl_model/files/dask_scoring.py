"""``puicl predict --scheduler ADDRESS``: a pool file scored on a dask cluster, partition by
partition, with the scores of one process.

The pool file is read by the workers (``dask.dataframe.read_parquet`` / ``read_csv``), each
partition is scored by the fitted classifier on the worker that holds it (a row's score does
not depend on the rows scored with it, :mod:`puicl_model.passes.query_rows`), and the scores
come back partition by partition, in file order, to be written as they arrive. The classifier
is scattered, fitted, to every worker first (``Client.scatter(..., broadcast=True)``), so that
the partitions spread; a dask DataFrame given to the classifier's own methods is
:mod:`puicl_model.estimator.dask_frames`' work. The fit itself (labeled rows and the pool's
sample, :mod:`puicl_model.files.large_tables`) runs where the command runs. Dask is an extra
(``pip install "puicl[distributed]"``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from puicl_common.dask_scheduler import SchedulerUnreachable
from puicl_common.dask_scheduler import check_scheduler as common_check
from puicl_model.estimator.dask_frames import import_dask

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.files.large_tables import FittedPool, PoolBatch, PUInput

__all__ = ["SchedulerUnreachable", "check_pool_file", "check_scheduler", "score_pool_on_dask"]

# how long ``puicl predict --scheduler`` waits for the scheduler before it fits anything
CONNECT_TIMEOUT_S = 10


def _connect(address: str, timeout_s: float | str = "30s") -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or SchedulerUnreachable.
    (dask reports a refused or timed-out connection as an OSError, which ``puicl predict``
    would otherwise read as a failure to write its output.)"""
    import_dask()
    from distributed import Client

    try:
        return Client(address, timeout=timeout_s)
    except (OSError, ValueError, TypeError) as err:
        raise SchedulerUnreachable(f"cannot reach the dask scheduler at {address}: {err}") \
            from None


def check_scheduler(address: str, timeout_s: float | None = None) -> None:
    """:func:`puicl_common.dask_scheduler.check_scheduler` within ``timeout_s`` (None:
    ``CONNECT_TIMEOUT_S``): ``puicl predict --scheduler`` calls it before the fit, so that a
    wrong address, a server that is no dask scheduler or a scheduler without workers (on which
    the scoring would wait forever) fails in seconds, in one line, not after the fit."""
    import_dask()
    common_check(address, CONNECT_TIMEOUT_S if timeout_s is None else float(timeout_s))


def _score_partition(frame: pd.DataFrame, classifier: PUICLClassifier, batch: PoolBatch,
                     features: list[str], csv_types: dict[str, str] | None = None) -> pd.DataFrame:
    """The output frame of a partition's pool rows (``batch``: a
    :class:`puicl_model.files.large_tables.PoolBatch`, the rows one process scores in a batch of
    the same file rows); ``csv_types``: a CSV's column types, as the scan decided them
    (:func:`puicl_model.files.table_io.restore_csv_types`)."""
    from puicl_model.files.large_tables import score_batch
    from puicl_model.files.table_io import restore_csv_types

    if csv_types:
        frame = restore_csv_types(frame, csv_types)
    return score_batch(classifier, batch, frame, features)


def check_pool_file(source: PUInput) -> None:
    """Refuse a pool file that dask's workers cannot read as one process does (``puicl
    predict --scheduler`` calls it before the fit): a CSV with a line break inside a quoted
    cell, as dask cuts the file into byte ranges at line breaks and would split that row."""
    scan = source.pool_scan
    if scan.format == "csv" and scan.multiline_cells:
        raise ValueError(f"{scan.path}: a quoted cell holds a line break, where dask's CSV "
                         "reader would cut the file; score it without --scheduler, or convert "
                         "it to Parquet")


def _read_pool(source: PUInput, dd: Any, blocksize: int | None) -> Any:
    """The pool's file as a dask DataFrame. A CSV's workers read every column with the type
    the scan decided from the whole file (:mod:`puicl_model.files.table_io`), not the one each
    would infer from its first rows, and text stays pandas' own text type (dask would make
    it pyarrow strings), so a partition holds the values one process reads."""
    import dask

    from puicl_model.files.table_io import csv_read_options

    check_pool_file(source)
    scan = source.pool_scan
    if scan.format == "parquet":
        return dd.read_parquet(scan.path)
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.read_csv(scan.path, blocksize=blocksize or "default",
                           **csv_read_options(scan.csv_types))


def score_pool_on_dask(classifier: PUICLClassifier, fitted: FittedPool,
                       write: Callable[[pd.DataFrame], None], address: str,
                       batch_rows: int | None = None) -> int:
    """``puicl predict --scheduler ADDRESS``: score the pool of ``fitted``
    (:class:`puicl_model.files.large_tables.FittedPool`) on the cluster at ``address`` and
    ``write`` each partition's scores in file order; returns the rows predicted negative.
    ``batch_rows`` (rows per batch) sets the CSV partitions' size, about 100 bytes a row.
    A bar over the rows written shows as the classifier's ``progress`` says; the workers
    show none."""
    from puicl_model.files.large_tables import pool_progress, write_scores

    dask = import_dask()
    import dask.dataframe as dd

    source = fitted.source
    with _connect(address) as client:
        pool = _read_pool(source, dd, None if batch_rows is None else 100 * batch_rows)
        lengths = pool.map_partitions(len).compute()
        ends = np.cumsum(lengths).astype(np.int64)
        if int(np.sum(lengths)) != source.pool_scan.n_rows:
            raise ValueError(f"{source.pool_scan.path}: dask read {int(np.sum(lengths))} rows, "
                             f"the scan {source.pool_scan.n_rows}")
        # the bar over the rows written here is the one bar: a worker's copy opens none (no
        # phase reaches a worker to say that another bar hears it, and no one reads its stderr)
        quiet = copy.copy(classifier).set_params(progress=False)
        fitted_classifier = client.scatter(quiet, broadcast=True)  # per worker
        csv_types = source.pool_scan.csv_types or None
        # which rows of a partition are pool rows, and their fitted positions, are decided
        # here, from the scan, as for the batches of one process
        parts = [dask.delayed(_score_partition)(part, fitted_classifier,
                                                fitted.batch(int(end - length), int(end)),
                                                source.features, csv_types)
                 for part, length, end in zip(pool.to_delayed(), lengths, ends, strict=True)]
        negative = 0
        with pool_progress(source, classifier.progress, "puicl predict (dask)") as bar:
            for future in client.compute(parts):
                scores = future.result()
                negative += write_scores(scores, write)
                future.release()
                bar.update(len(scores))
    return negative
