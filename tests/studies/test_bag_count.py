"""The bag-count study (studies/bag_count.py): each count of a learner on one table, judged
alone and in the model-weighted blend, paired per task against the fewest bags."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model.estimator.learners import learner_encoding
from studies.bag_count import learner, summary, task_rows
from studies.portfolio_replay import Kept, true_auc


def test_each_count_is_judged_alone_and_in_the_blend() -> None:
    rng = np.random.default_rng(0)
    n = 400
    y = (rng.random(n) < 0.4).astype(np.int64)
    X = pd.DataFrame({"a": rng.normal(size=n) + y, "b": rng.normal(size=n)})
    s = np.where((y == 1) & (rng.random(n) < 0.5), 1, 0)
    y_pool = y[s == 0]
    final = {"model": rng.normal(size=len(y_pool)) + y_pool,
             "logistic": rng.normal(size=len(y_pool)) + 0.5 * y_pool}
    kept = Kept("t", "cell", "folds", y_pool, int(s.sum()), 0.4, final, [], [], {})
    rows = task_rows(X, s, y, 7, ["forest"], [1, 3], kept)
    assert [(r["learner"], r["bags"]) for r in rows] == [("forest", 1), ("forest", 3)]
    for row in rows:
        assert 0.5 < row["auc"] <= 1 and 0.5 < row["blend_auc"] <= 1
    alone = task_rows(X, s, y, 7, ["forest"], [3])
    assert alone[0]["auc"] == rows[1]["auc"]  # the same keys: the same bags
    assert np.isnan(alone[0]["blend_auc"])
    # the blend's AUC is the replay's, with the learner in the forest's place
    x = learner_encoding().fit_transform(X, s == 1).astype(np.float64)
    _, scores = learner("forest", 7).fit(x[s == 1], x[s == 0], bags=3)
    with_forest = Kept("t", "cell", "folds", y_pool, 0, 0.4, {**final, "bagged": scores},
                       [], [], {})
    assert rows[1]["blend_auc"] == pytest.approx(
        true_auc(with_forest, {"model": 0.6, "logistic": 0.2, "bagged": 0.2}))


def test_counts_are_paired_per_task_against_the_fewest() -> None:
    frame = pd.DataFrame({
        "task": ["a", "a", "b", "b"], "learner": "forest", "bags": [5, 30, 5, 30],
        "auc": [0.70, 0.74, 0.80, 0.79], "blend_auc": np.nan, "seconds": [0.1, 0.3, 0.1, 0.3]})
    table = summary(frame).set_index("bags")
    assert table.loc[5, "minus_fewest"] == 0
    assert table.loc[30, "minus_fewest"] == pytest.approx(0.015)
    assert table.loc[30, "higher"] == 1 and table.loc[30, "tasks"] == 2
    assert set(table["judged"]) == {"auc"}  # a count never judged in the blend is left out
