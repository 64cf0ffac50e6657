"""``puicl predict`` prints π's bound, point and interval, and writes them with --prior-json."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from puicl_model.files.cli import main


def test_predict_prints_the_three_figures_and_writes_json(small_weights, tmp_path,
                                                          capsys) -> None:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"x1": rng.normal(size=90), "x2": rng.normal(size=90)})
    frame["s"] = np.r_[np.ones(30, dtype=int), np.zeros(60, dtype=int)]
    frame.to_csv(tmp_path / "table.csv", index=False)
    prior_json = tmp_path / "out" / "prior.json"
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "out" / "scores.csv"),
                 "--prior-json", str(prior_json)]) == 0
    printed = capsys.readouterr().out
    written = json.loads(prior_json.read_text())
    assert written["n_unlabeled"] == 60
    assert f"π bound (identified lower bound of the negative share): " \
           f"{written['lower_bound']:.4f}" in printed
    low_end, high_end = written["interval"]
    assert (f"π̂ {written['estimate']:.4f}, 90% sampling interval [{low_end:.4f}, "
            f"{high_end:.4f}] (the estimate's noise, not its bias)") in printed
    assert written["note"] in printed


def test_predict_refuses_a_prior_json_that_names_an_input(small_weights, tmp_path,
                                                          capsys) -> None:
    table = tmp_path / "table.csv"
    pd.DataFrame({"x": np.arange(30.0), "s": np.r_[np.ones(10), np.zeros(20)]}).to_csv(table)
    for path, message in ((table, f"is {table} (--input), which this command reads"),
                          (tmp_path, "is a directory")):
        code = main(["predict", "--input", str(table), "--label-column", "s",
                     "--weights", str(small_weights), "--prior-json", str(path)])
        assert code != 0
        assert message in capsys.readouterr().err


def test_predict_with_few_labeled_rows_reports_no_bound(small_weights, tmp_path, capsys) -> None:
    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"x1": rng.normal(size=60), "s": np.r_[np.ones(10), np.zeros(50)]})
    frame.to_csv(tmp_path / "table.csv", index=False)
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "scores.csv"),
                 "--prior-json", str(tmp_path / "prior.json")]) == 0
    printed = capsys.readouterr().out
    written = json.loads((tmp_path / "prior.json").read_text())
    assert written["lower_bound"] is None and written["poorly_identified"] is True
    assert "identified lower bound of the negative share): none;" in printed
    assert f"read π in [0.0000, {written['upper']:.4f}]" in printed
    assert "fewer than 20 labeled positives" in printed
