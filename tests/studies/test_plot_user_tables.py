"""The generated yardstick's per-table figure (studies/plot_user_tables.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studies.plot_user_tables import main, per_table_figure, read_report, short_name


def _frame() -> pd.DataFrame:
    frame = pd.DataFrame({
        "table": ["wide-mix-700r-200lab-p56-s1", "numeric-linear-700r-200lab-p84-s2",
                  "mixed-mix-3000r-13pct-p28-s3"],
        "cell": ["small:count", "small:count", "medium:share"],
        "default": [0.70, 0.90, 0.75],
        "pu-bagging": [0.75, 0.85, 0.70],
        "model": [0.69, np.nan, 0.78]})
    frame["best_alternative"] = frame[["pu-bagging", "model"]].max(axis=1)
    return frame


def test_each_panel_places_every_table_and_counts_those_within_the_bar() -> None:
    """A panel per cell; in each, the furthest behind at the bottom, each alternative's marker
    at the default's AUC minus its own, and the title's count of tables within 0.01."""
    figure = per_table_figure(_frame(), "t")
    small, medium = figure.axes[:2]
    assert "small:count: within 0.01 of the best alternative on 1 of 2" in small.get_title()
    assert "medium:share" in medium.get_title() and "on 0 of 1" in medium.get_title()
    labels = [tick.get_text() for tick in small.get_yticklabels()]
    assert labels == ["wide-mix-700r-200lab", "numeric-linear-700r-200lab"]  # -0.05 first
    pu_bagging = small.collections[0].get_offsets()
    assert np.allclose(pu_bagging[:, 0], [-0.05, 0.05]) and np.allclose(pu_bagging[:, 1], [0, 1])


def test_a_csv_that_is_not_a_report_is_refused_in_one_line(tmp_path, capsys) -> None:
    path = tmp_path / "other.csv"
    pd.DataFrame({"table": ["a"], "default": [0.5]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="no column cell, best_alternative"):
        read_report(path)
    out = tmp_path / "figure.png"
    assert main(["--csv", str(path), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "not a report" in error
    assert not out.exists()


def test_the_figure_is_written_from_the_report(tmp_path) -> None:
    path, out = tmp_path / "report.csv", tmp_path / "figures" / "decision.png"
    _frame().to_csv(path, index=False)
    assert main(["--csv", str(path), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert short_name("mixed-interaction-20000r-24pct-p46-s1582477940") == \
        "mixed-interaction-20000r-24pct"
