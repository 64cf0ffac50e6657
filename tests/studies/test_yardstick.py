"""The yardstick's per-task join and figures (studies/yardstick.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from studies.yardstick import per_task, summary


def _rows(method: str, aucs: dict[tuple[str, int], float], seconds: float = 1.0) -> list[dict]:
    return [{"dataset": table, "repetition": rep, "method": method, "max_positives": 600,
             "pi_target": 0.2, "label_frequency": float("nan"), "pi_true": 0.2,
             "n_labeled": 200, "n_unlabeled": 500, "auc": auc, "fit_predict_s": seconds}
            for (table, rep), auc in aucs.items()]


def test_the_yardstick_judges_each_task_against_its_better_baseline() -> None:
    tasks = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    default = pd.DataFrame(
        _rows("puicl", dict(zip(tasks, [0.80, 0.82, 0.60, 0.62], strict=True)), 3.0)
        + _rows("elkan-noto", dict(zip(tasks, [0.70, 0.70, 0.65, 0.61], strict=True)))
        + _rows("pu-bagging", dict(zip(tasks, [0.72, 0.70, 0.60, 0.66], strict=True))))
    alone = pd.DataFrame(_rows("puicl", dict(zip(tasks, [0.84, 0.84, 0.60, 0.60],
                                                 strict=True)), 1.0))
    frame = per_task(default, alone)
    assert frame["best_baseline"].tolist() == pytest.approx([0.72, 0.70, 0.65, 0.66])
    figures = summary(frame)
    assert figures["tasks"] == 4
    assert figures["default-alone"] == pytest.approx((-0.03 + 0.01) / 2)
    # per repetition the suite's mean difference is -0.02 and 0.0: SE 0.01
    assert figures["default-alone_se_seed"] == pytest.approx(0.01)
    assert figures["tables_default_below_alone"] == 1
    # table a: the model leads by 0.13; table b: trails by 0.055
    assert figures["tables_alone_leads_0.02"] == 1
    assert figures["tables_alone_leads_0.05"] == 1
    assert figures["share_tasks_alone_behind"] == pytest.approx(0.5)
    assert figures["share_tasks_default_behind"] == pytest.approx(0.5)
    assert figures["seconds_default"] / figures["seconds_alone"] == pytest.approx(3.0)


def test_runs_of_different_tasks_are_refused() -> None:
    default = pd.DataFrame(_rows("puicl", {("a", 0): 0.8}) + _rows("elkan-noto", {("a", 0): 0.7}))
    alone = pd.DataFrame(_rows("puicl", {("a", 0): 0.8})).assign(n_unlabeled=400)
    with pytest.raises(ValueError, match="different tasks"):
        per_task(default, alone)
