"""studies/wide_tables.py: the widened tasks and the blends its report judges."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from studies.portfolio_evidence import Task
from studies.wide_tables import blend_auc, evidence_gaps, parse_blend, summary, widened


def _task(name: str) -> Task:
    x = pd.DataFrame({"a": np.arange(6.0), "b": list("xyzxyz")})
    return Task(name, "cell", x, np.array([1, 1, 0, 0, 0, 0]), np.array([1, 1, 1, 0, 1, 0]), 3)


def test_a_widened_task_keeps_its_columns_and_rows_and_is_keyed_by_its_name() -> None:
    task = _task("600_pi0.5/t")
    wide = widened(task, 5)
    assert list(wide.X.columns[:2]) == ["a", "b"] and wide.X.shape == (6, 7)
    assert wide.X["b"].tolist() == task.X["b"].tolist() and task.X.shape == (6, 2)
    assert np.array_equal(wide.s, task.s) and np.array_equal(wide.y, task.y)
    again, other = widened(task, 5), widened(_task("600_pi0.5/u"), 5)
    assert again.X.equals(wide.X) and not other.X.iloc[:, 2:].equals(wide.X.iloc[:, 2:])
    array_task = Task("n", "cell", np.ones((6, 2)), task.s, task.y, 3)
    assert widened(array_task, 1).X.shape == (6, 3)


def test_blends_standardize_each_member_before_weighing_it() -> None:
    rng = np.random.default_rng(0)
    y = rng.random(200) < 0.5
    kept = {"y_pool": y, "a": y + rng.normal(size=200), "b": 100.0 * rng.normal(size=200)}
    assert blend_auc(kept, {"a": 1.0}) == pytest.approx(roc_auc_score(y, kept["a"]))
    # b's scale is 100 times a's: weighed equally after standardizing, b does not swamp a
    assert blend_auc(kept, parse_blend("a:0.5+b:0.5")) > 0.6
    assert parse_blend("model:0.6+bb:0.4") == {"model": 0.6, "bb": 0.4}
    with pytest.raises(ValueError, match="member:weight"):
        parse_blend("model")


def test_the_summary_counts_tasks_against_the_reference() -> None:
    frame = pd.DataFrame({"default": [0.70, 0.80, 0.60], "ref": [0.70, 0.78, 0.65],
                          "new": [0.72, 0.78, 0.65], "best_member": [0.72, 0.80, 0.70]},
                         index=["t1", "t2", "t3"])
    table = summary(frame, ["new"], "ref")
    assert table.loc["default", "above_0.01"] == 1 and table.loc["default", "below_0.01"] == 1
    assert table.loc["new", "above_0.01"] == 1 and table.loc["new", "below_0.01"] == 0
    assert table.loc["new", "within_0.01_of_best_member"] == 1
    assert table.loc["new", "minus_against"] == pytest.approx(0.02 / 3)


def test_an_evidence_gap_is_zero_where_labeled_positives_score_as_pool_positives(
        tmp_path) -> None:
    """Under SCAR a score whose labeled positives are distributed as the pool's positives
    implies its own pool AUC; a score that adds noise to the labeled positives only implies a
    lower one."""
    rng = np.random.default_rng(1)
    y = rng.random(20_000) < 0.4
    pool = y + rng.normal(size=y.size)
    labeled = 1 + rng.normal(size=5_000)
    noisy = labeled + 2 * rng.normal(size=labeled.size)
    arrays = {"y_pool": y.astype(np.int64)}
    for learner, scores in (("logistic", labeled), ("bagged", labeled), ("bb", noisy),
                            ("bb30", labeled)):
        arrays[learner], arrays[f"{learner}_labeled"] = pool, scores
    np.savez(tmp_path / "t.npz", **arrays)
    gaps = evidence_gaps(tmp_path)
    assert abs(gaps.loc["t", "logistic"]) < 0.01 and abs(gaps.loc["t", "bb30"]) < 0.01
    assert gaps.loc["t", "bb"] < -0.05
