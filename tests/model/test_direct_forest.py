"""PU bagging's forests grown on scikit-learn's tree builder directly
(puicl_model.estimator.direct_forest): the same trees and probabilities as scikit-learn's
RandomForestClassifier, and scikit-learn's forest wherever that cannot be shown."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from puicl_model.estimator import direct_forest, learners
from puicl_model.estimator.direct_forest import DirectForest, follows_scikit_learn
from puicl_model.estimator.learners import BAGGED, CrossFittedLearner


def _same_forest(ours: DirectForest, theirs: RandomForestClassifier, rows: np.ndarray) -> None:
    assert ours.predict_proba(rows).tobytes() == theirs.predict_proba(rows).tobytes()
    assert list(ours.classes_) == list(theirs.classes_)
    for mine, reference in zip(ours.estimators_, theirs.estimators_, strict=True):
        for name in ("children_left", "children_right", "feature", "threshold", "value"):
            assert getattr(mine.tree_, name).tobytes() == getattr(reference.tree_, name).tobytes()


@pytest.mark.parametrize(("n_rows", "n_columns", "trees", "leaf", "seed"),
                         [(320, 10, 10, 10, 1), (700, 4, 10, 3, 2**31 - 2), (45, 1, 3, 1, 0),
                          (200, 60, 7, 20, 12345)])
def test_a_direct_forest_is_scikit_learns_forest_bit_for_bit(rng, n_rows, n_columns, trees, leaf,
                                                             seed) -> None:
    x = rng.normal(size=(n_rows, n_columns))
    x[: n_rows // 3] = np.round(x[: n_rows // 3], 1)  # ties among the thresholds
    y = (x[:, 0] + rng.normal(size=n_rows) > 0.5).astype(np.int64)
    theirs = RandomForestClassifier(n_estimators=trees, min_samples_leaf=leaf, n_jobs=1,
                                    random_state=seed).fit(x, y)
    ours = DirectForest(trees, leaf, seed).fit(x, y)
    _same_forest(ours, theirs, rng.normal(scale=2.0, size=(300, n_columns)))


def test_missing_and_infinite_values_go_to_scikit_learns_forest(rng) -> None:
    x = rng.normal(size=(200, 4))
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 1]) > 0).astype(np.int64)
    rows = rng.normal(size=(100, 4))
    rows[rng.random(rows.shape) < 0.2] = np.nan
    theirs = RandomForestClassifier(n_estimators=5, min_samples_leaf=10, n_jobs=1,
                                    random_state=3).fit(x, y)
    _same_forest(DirectForest(5, 10, 3).fit(x, y), theirs, rows)
    x[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        DirectForest(5, 10, 3).fit(x, y)
    with pytest.raises(ValueError, match="columns"):
        DirectForest(5, 10, 3).fit(rows, y[:100]).predict_proba(rows[:, :3])


def test_this_scikit_learn_is_followed_and_a_changed_builder_falls_back(monkeypatch) -> None:
    """With the installed scikit-learn the learners grow their forests directly (a release
    that changes the builder fails here, not silently four times slower); a builder that
    no longer takes the same arguments sends them to scikit-learn's forest."""
    assert follows_scikit_learn(learners.FOREST_TREES, learners.FOREST_LEAF)
    assert isinstance(direct_forest.forest(10, 10, 0), DirectForest)
    from sklearn.tree import _splitter

    def changed(*args):
        raise TypeError("another signature")

    follows_scikit_learn.cache_clear()
    monkeypatch.setattr(_splitter, "BestSplitter", changed)
    try:
        assert not follows_scikit_learn(10, 10)
        assert isinstance(direct_forest.forest(10, 10, 0), RandomForestClassifier)
    finally:
        follows_scikit_learn.cache_clear()


def test_pu_bagging_scores_the_same_bytes_with_scikit_learns_forest(rng, monkeypatch) -> None:
    """The bagged learner's scores, of its rows and of new ones, are the bytes that
    scikit-learn's forests give it."""
    x_labeled, x_pool = rng.normal(size=(80, 5)) + 0.7, rng.normal(size=(300, 5))
    x_new = rng.normal(size=(50, 5))
    direct = CrossFittedLearner(BAGGED, 11, n_threads=1)
    scores = [*direct.fit(x_labeled, x_pool), direct.decision(x_new)]
    assert all(isinstance(model, DirectForest) for model in direct.models_)
    monkeypatch.setattr(direct_forest, "follows_scikit_learn", lambda trees, leaf: False)
    reference = CrossFittedLearner(BAGGED, 11, n_threads=1)
    again = [*reference.fit(x_labeled, x_pool), reference.decision(x_new)]
    assert all(isinstance(model, RandomForestClassifier) for model in reference.models_)
    for ours, theirs in zip(scores, again, strict=True):
        assert ours.tobytes() == theirs.tobytes()


def test_bags_run_side_by_side_from_their_own_number_of_cells(rng, monkeypatch) -> None:
    """PU bagging's bags take the pool of threads from learners.BAG_THREADS_FROM_CELLS cells
    (the other learners' fits from THREADS_FROM_CELLS), and one after another below it."""
    import threading

    names: list[str] = []
    fit = DirectForest.fit

    def recording_fit(self, x, y):
        names.append(threading.current_thread().name)
        return fit(self, x, y)

    monkeypatch.setattr(DirectForest, "fit", recording_fit)
    x_labeled, x_pool = rng.normal(size=(50, 4)) + 1.0, rng.normal(size=(150, 4))
    cells = 2 * 40 * 4  # a bag: 40 labeled positives outside its fold, as many pool rows
    for threshold, side_by_side in ((cells + 1, False), (cells, True)):
        names.clear()
        monkeypatch.setattr(learners, "BAG_THREADS_FROM_CELLS", threshold)
        CrossFittedLearner(BAGGED, 3, n_threads=2).fit(x_labeled, x_pool)
        on_caller = set(names) == {threading.current_thread().name}
        assert len(names) == learners.BAGS and on_caller != side_by_side
