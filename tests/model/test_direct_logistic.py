"""The logistic learner's fits made directly on scikit-learn's loss and optimiser
(puicl_model.estimator.direct_logistic): every attribute of LogisticRegression.fit's fit, bit for
bit, and LogisticRegression.fit itself wherever that cannot be shown."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from puicl_model.estimator import direct_logistic
from puicl_model.estimator.direct_logistic import fit_logistic, follows_scikit_learn
from puicl_model.estimator.learners import LOGISTIC, CrossFittedLearner


def _same_fit(ours: LogisticRegression, theirs: LogisticRegression) -> None:
    assert type(ours) is LogisticRegression
    assert vars(ours).keys() == vars(theirs).keys()
    for name, value in vars(theirs).items():
        mine = getattr(ours, name)
        assert type(mine) is type(value), name
        if isinstance(value, np.ndarray) and value.dtype == object:  # names: no bytes to compare
            assert mine.tolist() == value.tolist(), name
        elif isinstance(value, np.ndarray):
            assert (mine.dtype, mine.shape, mine.tobytes()) == (value.dtype, value.shape,
                                                                value.tobytes()), name
        else:
            assert mine == value, name


@pytest.mark.parametrize(("n_rows", "n_columns", "scale", "c"),
                         [(560, 10, 1.0, 1.0), (1200, 50, 3.0, 1.0), (40, 2, 0.01, 1.0),
                          (300, 7, 100.0, 0.1)])
def test_a_direct_fit_is_logistic_regressions_fit_bit_for_bit(rng, n_rows, n_columns, scale,
                                                              c) -> None:
    x = rng.normal(scale=scale, size=(n_rows, n_columns))
    x[: n_rows // 4] = np.round(x[: n_rows // 4])  # ties and repeated values
    y = (x[:, 0] / scale + rng.normal(size=n_rows) > 0.8).astype(np.int64)
    _same_fit(fit_logistic(x, y, c=c), LogisticRegression(C=c, max_iter=1000).fit(x, y))


def test_an_unconverged_fit_warns_as_logistic_regression_does(rng) -> None:
    x = rng.normal(size=(400, 12))
    y = (x @ rng.normal(size=12) > 0).astype(np.int64)  # separable: many iterations
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        fitted = fit_logistic(x, y, max_iter=3)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        reference = LogisticRegression(max_iter=3).fit(x, y)
    _same_fit(fitted, reference)
    assert [w.category for w in ours] == [w.category for w in theirs] == [ConvergenceWarning]
    assert str(ours[0].message) == str(theirs[0].message)


def test_rows_it_cannot_fit_directly_go_to_logistic_regression(rng) -> None:
    """Float32 or non-contiguous rows, labels of another type: the same fit; missing values
    and a single class: LogisticRegression's own error."""
    x = rng.normal(size=(200, 4))
    y = (x[:, 1] > 0).astype(np.int64)
    reference = LogisticRegression(max_iter=1000)
    _same_fit(fit_logistic(x.astype(np.float32), y),
              reference.fit(x.astype(np.float32), y))
    _same_fit(fit_logistic(np.asfortranarray(x), y), LogisticRegression(max_iter=1000).fit(x, y))
    _same_fit(fit_logistic(x, y.astype(bool)),
              LogisticRegression(max_iter=1000).fit(x, y.astype(bool)))
    frame = pd.DataFrame(np.ascontiguousarray(x), columns=[f"c{i}" for i in range(4)])
    _same_fit(fit_logistic(frame, y), LogisticRegression(max_iter=1000).fit(frame, y))
    with pytest.raises(ValueError, match="NaN"):
        fit_logistic(np.where(x > 2, np.nan, x), y)
    with pytest.raises(ValueError, match="class"):
        fit_logistic(x, np.ones(200, np.int64))
    with pytest.raises(ValueError, match="0 feature"):
        fit_logistic(np.empty((200, 0)), y)


def test_this_scikit_learn_is_followed_and_a_changed_loss_falls_back(rng, monkeypatch) -> None:
    """With the installed scikit-learn the learner fits directly (a release that changes the
    private calls fails here, not silently slower); a loss that no longer takes the same
    arguments sends the fits to LogisticRegression.fit."""
    assert follows_scikit_learn(1.0, 1000)
    from sklearn.linear_model import _linear_loss

    def changed(*args, **kwargs):
        raise TypeError("another signature")

    calls: list[int] = []
    direct_fit = direct_logistic._direct_fit
    monkeypatch.setattr(direct_logistic, "_direct_fit",
                        lambda *args: calls.append(1) or direct_fit(*args))
    follows_scikit_learn.cache_clear()
    monkeypatch.setattr(_linear_loss, "LinearModelLoss", changed)
    try:
        assert not follows_scikit_learn(1.0, 1000)
        checked = len(calls)
        x = rng.normal(size=(100, 3))
        y = (x[:, 0] > 0).astype(np.int64)
        monkeypatch.undo()  # the loss as it was: only the cached answer sends the fit away
        monkeypatch.setattr(direct_logistic, "_direct_fit",
                            lambda *args: calls.append(1) or direct_fit(*args))
        _same_fit(fit_logistic(x, y), LogisticRegression(max_iter=1000).fit(x, y))
        assert len(calls) == checked
    finally:
        follows_scikit_learn.cache_clear()


def test_the_logistic_learner_scores_the_same_bytes_with_logistic_regressions_fit(
        rng, monkeypatch) -> None:
    x_labeled, x_pool = rng.normal(size=(80, 5)) + 0.5, rng.normal(size=(300, 5))
    x_new = rng.normal(size=(50, 5))
    direct = CrossFittedLearner(LOGISTIC, 11, n_threads=1)
    scores = [*direct.fit(x_labeled, x_pool), direct.decision(x_new)]
    monkeypatch.setattr(direct_logistic, "follows_scikit_learn", lambda c, max_iter: False)
    reference = CrossFittedLearner(LOGISTIC, 11, n_threads=1)
    again = [*reference.fit(x_labeled, x_pool), reference.decision(x_new)]
    for ours, theirs in zip(direct.models_, reference.models_, strict=True):
        _same_fit(ours, theirs)
    for ours, theirs in zip(scores, again, strict=True):
        assert ours.tobytes() == theirs.tobytes()
