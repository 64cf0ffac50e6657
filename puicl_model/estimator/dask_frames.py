"""A fitted classifier over a dask DataFrame: lazy dask results with declared ``meta``.

A fitted :class:`~puicl_model.estimator.classifier.PUICLClassifier` scores any row alone: its
probability does not depend on the rows it is scored with (:mod:`puicl_model.passes.query_rows`).
So :func:`predict_proba` and :func:`predict` score a dask DataFrame by ``map_partitions``, each
partition by the fitted classifier on the worker that holds it, and return dask arrays with
declared ``meta``, lazily, as scikit-learn's methods return numpy arrays (the convention of
dask-ml's ``ParallelPostFit``): the bytes one process computes, for any number of partitions
and workers. The classifier's own ``predict_proba``, ``predict_log_proba`` and ``predict`` call
them when given a dask DataFrame.

The classifier is put in the graph once, as one ``dask.delayed`` value (dask moves it to a
worker that needs it, and tends to keep the partitions there), as ``fit`` left it: the fitted
pool's scores, the blend and π̂ travel with it rather than being computed again by each
worker. Dask is an extra (``pip install "puicl[distributed]"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier

__all__ = ["dask_frame", "dask_kind", "import_dask", "predict", "predict_proba"]


def import_dask() -> Any:
    try:
        import dask
        import dask.dataframe
    except ImportError:
        raise ImportError("scoring on dask needs dask: pip install \"puicl[distributed]\"") \
            from None
    return dask


def _shared(classifier: PUICLClassifier) -> Any:
    """The fitted classifier (its pool scored and its blend chosen by ``fit``) as one
    ``dask.delayed`` value of the graph."""
    dask = import_dask()
    return dask.delayed(classifier, pure=False)


def _proba(frame: pd.DataFrame, classifier: PUICLClassifier) -> np.ndarray:
    return classifier.predict_proba(frame)


def _labels(frame: pd.DataFrame, classifier: PUICLClassifier) -> np.ndarray:
    return classifier.predict(frame)


def dask_kind(X: Any) -> str | None:
    """"dataframe" or "array" for a dask DataFrame or Array, else None (told without importing
    dask: a table that is not dask's never pays for it)."""
    if type(X).__module__.split(".")[0] != "dask":
        return None
    if hasattr(X, "map_partitions") and hasattr(X, "columns"):
        return "dataframe"
    return "array" if hasattr(X, "map_blocks") else None


def dask_frame(X: Any) -> Any:
    """A dask DataFrame as it is; a dask Array refused in one line (its blocks may split a
    row's columns, and its column names, which fit may have seen, are lost)."""
    if dask_kind(X) == "array":
        raise TypeError("X is a dask Array: pass a dask DataFrame "
                        "(dask.dataframe.from_dask_array(X, columns=...))")
    return X


def predict_proba(classifier: PUICLClassifier, X: Any) -> Any:
    """``classifier.predict_proba`` of every row of the dask DataFrame ``X``: a dask array
    [n, 2], partitioned as ``X``."""
    return X.map_partitions(_proba, _shared(classifier), meta=np.empty((0, 2), dtype=np.float64))


def predict(classifier: PUICLClassifier, X: Any) -> Any:
    """``classifier.predict`` of every row of the dask DataFrame ``X``: a dask array [n]."""
    return X.map_partitions(_labels, _shared(classifier), meta=np.empty(0, dtype=np.int64))
