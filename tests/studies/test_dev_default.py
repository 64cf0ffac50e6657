"""studies/dev_default.py: two runs' records compared per task, on the tasks both hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies.dev_default import compare


def _records(root: Path, rows: list[tuple[str, float, str, float]]) -> Path:
    for task, auc, choice, seconds in rows:
        path = root / f"{task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"task": task, "group": task.split("/")[0], "auc": auc,
                                    "choice": choice, "seconds": seconds}))
    return root


def test_compare_pairs_the_tasks_both_runs_hold(tmp_path: Path) -> None:
    before = _records(tmp_path / "a", [("c1/t1", 0.70, "model-weighted", 2.0),
                                       ("c1/t2", 0.80, "model-weighted", 3.0),
                                       ("c2/t3", 0.60, "model-weighted", 1.0),
                                       ("c2/only_before", 0.10, "model", 9.0)])
    after = _records(tmp_path / "b", [("c1/t1", 0.75, "bagged-boosted", 4.0),
                                      ("c1/t2", 0.80, "model-weighted", 5.0),
                                      ("c2/t3", 0.58, "logistic", 1.5)])
    table = compare(before, after)
    assert table.loc["ALL", "tasks"] == 3
    assert table.loc["ALL", "difference"] == pytest.approx((0.05 + 0.0 - 0.02) / 3)
    assert table.loc["ALL", "worst"] == pytest.approx(-0.02)
    assert table.loc["ALL", "picks_changed"] == 2
    assert table.loc["c1", "picks_changed"] == 1 and table.loc["c1", "tasks"] == 2
    assert table.loc["ALL", "seconds_before"] == pytest.approx(6.0)
    assert table.loc["ALL", "seconds_after"] == pytest.approx(10.5)


def test_compare_refuses_an_empty_run(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no records"):
        compare(tmp_path / "empty", tmp_path / "empty")
