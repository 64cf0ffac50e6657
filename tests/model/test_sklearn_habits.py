"""What scikit-learn and dask users expect of a classifier: ``predict_log_proba``, and a dask
DataFrame in giving a lazy dask array out with declared meta (dask-ml's ``ParallelPostFit``
convention)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier


@pytest.fixture
def fitted(table, rng, small_weights) -> tuple[PUICLClassifier, pd.DataFrame]:
    X, s = table(rng, 30, 120, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(frame, s)
    return clf, frame[s == 0].reset_index(drop=True)


def test_predict_log_proba_is_the_log_of_predict_proba(fitted) -> None:
    clf, pool = fitted
    logs = clf.predict_log_proba(pool)
    assert logs.shape == (len(pool), 2) and logs.dtype == np.float64
    np.testing.assert_array_equal(logs, np.log(clf.predict_proba(pool)))
    np.testing.assert_allclose(np.exp(logs).sum(axis=1), 1.0)


def test_a_dask_dataframe_gives_a_lazy_dask_array_with_meta(fitted, monkeypatch) -> None:
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    import dask.array as da

    clf, pool = fitted
    expected, labels = clf.predict_proba(pool), clf.predict(pool)
    scored = []
    original = PUICLClassifier._positive_probability
    monkeypatch.setattr(PUICLClassifier, "_positive_probability",
                        lambda self, X: scored.append(len(X)) or original(self, X))
    X = dd.from_pandas(pool, npartitions=3)
    proba, logs, predicted = clf.predict_proba(X), clf.predict_log_proba(X), clf.predict(X)
    assert scored == []  # nothing of X is scored before compute()
    for result, meta in ((proba, np.float64), (logs, np.float64), (predicted, np.int64)):
        assert isinstance(result, da.Array)
        assert result._meta.dtype == meta and result._meta.ndim == (1 if result is predicted
                                                                    else 2)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(proba.compute(), expected)  # the bytes of one process
        np.testing.assert_array_equal(logs.compute(), np.log(expected))
        np.testing.assert_array_equal(predicted.compute(), labels)
    assert sum(scored) == 3 * len(pool)
    with pytest.raises(TypeError, match="X is a dask Array: pass a dask DataFrame"):
        clf.predict_proba(da.from_array(pool.to_numpy(), chunks=40))
