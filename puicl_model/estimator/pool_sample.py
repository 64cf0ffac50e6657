"""The pool a large table is fitted on: a seeded sample of its unlabeled rows.

What the classifier learns from the pool as a whole (the chunks that new rows join, the logistic
learner and the blend, π̂ and its interval) is as good from a sample of some ten thousand rows
as from millions, and a sample bounds the memory and time of ``fit`` whatever the pool's size.
So a pool of more than ``pool_sample`` unlabeled rows is fitted on ``pool_sample`` of them,
drawn without replacement, keyed by the fit's seed and the pool's size alone
(:func:`sampled_pool_rows`), and kept in pool order; every pool row is still scored, the others
as new rows (:mod:`puicl_model.passes.query_rows`). Because the draw depends on nothing but the seed
and the number of unlabeled rows, a reader that streams a table can gather the same rows
without holding the table (:mod:`puicl_model.files.large_tables`), and the fitted table is then
exactly the one ``fit`` builds from the whole table in memory (:func:`fitted_table`). Such a
reader draws the sample once and hands ``fit`` the sample itself, with the pool's size
(``fit(X, s, sampled_from=n)``), so that ``fit`` draws nothing again; it knows which pool rows
were left out, and has them scored as new rows without looking for them in the fitted pool
(:data:`NEW_ROW`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from puicl_model.estimator.columns import is_dataframe
from puicl_model.passes import seed_keys

__all__ = ["NEW_ROW", "fitted_table", "sampled_pool_rows", "take_rows"]

# ``PUICLClassifier.predict_and_proba``'s ``pool_rows`` entry for a row to be scored as a new
# row, not looked for among the fitted rows by its values (as -1 is): a pool row left out of the
# sample is a new row by construction, even where it equals a sampled row
NEW_ROW = -2


def sampled_pool_rows(n_pool: int, size: int | None, entropy: int) -> np.ndarray | None:
    """The positions (sorted) among the ``n_pool`` unlabeled rows that a fit with root seed
    ``entropy`` keeps, or None when it keeps them all (``size`` None or not exceeded)."""
    if size is None or n_pool <= size:
        return None
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_keys.POOL_SAMPLE,)))
    return np.sort(rng.permutation(n_pool)[:size])


def take_rows(X: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of a table given to ``fit``: a DataFrame stays one (with its dtypes)."""
    if is_dataframe(X):
        return X.iloc[rows]
    if hasattr(X, "shape") and hasattr(X, "__getitem__"):
        return X[rows]
    return np.asarray(X, dtype=object)[rows]


def fitted_table(X: Any, labeled: np.ndarray, size: int | None, entropy: int,
                 sampled_from: int | None = None) -> tuple[Any, np.ndarray] | None:
    """``(X', labeled')``: the labeled rows of ``X`` then its sampled unlabeled rows, each in
    their order, when the pool exceeds ``size``; None when the whole table is fitted, as it is
    when ``sampled_from`` says that ``X``'s unlabeled rows are the sample already (of a pool of
    that many, :func:`puicl_model.estimator.input_checks.check_sampled_from`)."""
    if sampled_from is not None:  # drawn by the caller, from the same seed: not drawn again
        return None
    pool = np.flatnonzero(~labeled)
    kept = sampled_pool_rows(len(pool), size, entropy)
    if kept is None:
        return None
    rows = np.concatenate([np.flatnonzero(labeled), pool[kept]])
    n_labeled = int(labeled.sum())
    return take_rows(X, rows), np.arange(len(rows)) < n_labeled
