"""The generated yardstick's reading of predict's lines (studies/user_yardstick.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puicl_model.estimator.prior_report import ClassPriorReport, threshold_note
from studies.user_yardstick import _unplaced_range, compare, said_line


def _report(estimate: float, status: str) -> ClassPriorReport:
    return ClassPriorReport(lower_bound=0.1, estimate=estimate, interval=(estimate, estimate),
                            upper=0.8, allowance=0.2, level=0.9, n_bootstrap=10, delta=0.025,
                            poorly_identified=status != "identified", note="", status=status,
                            held_out_auc=None)


def test_the_unplaced_line_is_read_with_the_range_predict_names() -> None:
    """The range is read off the words predict writes: a change of wording that the study
    could no longer read fails here, not silently in a count."""
    pool = np.r_[np.full(80, 0.9), np.full(20, 0.1)]  # the cut labels 20 % negative
    unplaced = threshold_note(pool, 0.5, 0.1, _report(0.25, "poorly identified"))
    contradicted = threshold_note(pool, 0.5, 0.1, _report(0.45, "poorly identified"))
    assert _unplaced_range(unplaced) == (0.1, 0.8)
    assert contradicted is not None and _unplaced_range(contradicted) is None
    assert _unplaced_range(None) is None and _unplaced_range(float("nan")) is None

    frame = pd.DataFrame({
        "cut_said": [True, True, True],
        "unplaced_range": [(0.1, 0.8), (0.1, 0.8), None],
        "true_share": [0.5, 0.05, 0.5],  # π 0.5 and 0.95: inside and outside the range
        "positive_share": [0.8, 0.8, 0.5],  # the first two miss the truth by more than 0.10
        "pi_hat": [0.2, 0.2, 0.5]})
    line = said_line(frame)
    assert "unplaced on 2 (a miss of more than 0.1 on 2), π inside the range it names on 1" in line


def test_compare_pairs_reruns_with_the_run_they_replace(tmp_path) -> None:
    """A rerun's record replaces its table's (the first run holding it wins, on each side);
    tables not rerun count 0 in the mean over every table and are left out of the reruns'."""
    import json

    def record(out, table: str, cell: str, auc: float, choice: str) -> None:
        (out / table).mkdir(parents=True, exist_ok=True)
        (out / table / "default.json").write_text(json.dumps(
            {"table": table, "cell": cell, "method": "default", "auc": auc, "choice": choice,
             "seconds": 1.0}))

    run, fixed, rerun, older = (tmp_path / name for name in ("run", "fixed", "rerun", "older"))
    for table, auc in (("a", 0.70), ("b", 0.80), ("c", 0.60)):
        record(run, table, "medium:share", auc, "model-weighted")
    record(fixed, "b", "medium:share", 0.82, "model-weighted")  # before: b as fixed
    record(rerun, "a", "medium:share", 0.76, "bagged-boosted")
    record(rerun, "b", "medium:share", 0.80, "model-weighted")
    record(older, "a", "medium:share", 0.10, "logistic")  # read after rerun: never wins
    table = compare([fixed, run], [rerun, older])
    row = table.loc["medium:share"]
    assert row["tables"] == 3 and row["rerun"] == 2 and row["picks_changed"] == 1
    assert np.isclose(row["difference"], (0.06 - 0.02) / 3, atol=1e-4)  # (rounded)
    assert np.isclose(row["rerun_difference"], (0.06 - 0.02) / 2, atol=1e-4)
    assert np.isclose(row["worst"], -0.02) and np.isclose(row["best"], 0.06)
    assert table.loc["all", "tables"] == 3
