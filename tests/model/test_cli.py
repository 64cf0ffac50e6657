"""``puicl predict`` / ``puicl info`` on CSV files, in both input layouts."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.cli import main


@pytest.fixture
def frame(rng) -> pd.DataFrame:
    n = 70
    data = pd.DataFrame(
        {
            "id": np.arange(1000, 1000 + n),
            "x1": rng.normal(size=n),
            "x2": rng.normal(size=n),
            "colour": rng.choice(["red", "blue"], size=n),
        }
    )
    data.loc[3, "x2"] = np.nan
    data["s"] = 0
    data.loc[rng.choice(n, 20, replace=False), "s"] = 1
    return data


def test_one_table_with_a_label_column(frame, small_weights, tmp_path, capsys) -> None:
    frame.to_csv(tmp_path / "table.csv", index=False)
    out = tmp_path / "out" / "scores.csv"
    code = main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--drop-columns", "id", "--weights", str(small_weights), "--output", str(out)])
    assert code == 0
    result = pd.read_csv(out)
    assert list(result.columns) == ["row", "p_positive", "label"]
    unlabeled = np.flatnonzero(frame["s"].to_numpy() == 0)
    np.testing.assert_array_equal(result["row"], unlabeled)

    features = frame.drop(columns=["id", "s"])
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(features, frame["s"])
    expected = clf.predict_proba(features.iloc[unlabeled])[:, 1]
    np.testing.assert_allclose(result["p_positive"], expected, atol=1e-6)  # CSV keeps 6 digits
    np.testing.assert_array_equal(result["label"], (expected > 0.5).astype(int))
    printed = capsys.readouterr().out
    assert f"wrote 50 rows to {out}" in printed
    assert f"unlabeled rows): {clf.estimate_class_prior():.4f}" in printed


def test_positives_and_unlabeled_files_give_the_same_scores(frame, small_weights, tmp_path,
                                                            capsys) -> None:
    features = frame.drop(columns=["id"])
    features.to_csv(tmp_path / "table.csv", index=False)
    features[features.s == 1].drop(columns="s").to_csv(tmp_path / "pos.csv", index=False)
    features[features.s == 0].drop(columns="s").to_csv(tmp_path / "unl.csv", index=False)
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "a.csv")]) == 0
    capsys.readouterr()
    # to standard output, thresholded at the estimated prior
    assert main(["predict", "--positives", str(tmp_path / "pos.csv"), "--unlabeled",
                 str(tmp_path / "unl.csv"), "--weights", str(small_weights),
                 "--threshold", "prior"]) == 0
    captured = capsys.readouterr()
    from_stdout = pd.read_csv(pd.io.common.StringIO(captured.out))
    one_table = pd.read_csv(tmp_path / "a.csv")
    np.testing.assert_array_equal(from_stdout["row"], np.arange(50))
    np.testing.assert_allclose(from_stdout["p_positive"], one_table["p_positive"], atol=2e-6)
    assert "π̂ (estimated negative share of the 50 unlabeled rows)" in captured.err
    pi_hat = float(captured.err.split("rows): ")[1].split(";")[0])
    assert (from_stdout["label"] == 0).sum() == round(pi_hat * 50)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "{dir}/table.csv", "--label-column", "t"],
         "has no column 't'; its columns are"),
        (["--input", "{dir}/table.csv", "--label-column", "s", "--positives", "{dir}/table.csv"],
         "give either --input with --label-column, or --positives with --unlabeled"),
        (["--positives", "{dir}/table.csv", "--unlabeled", "{dir}/other.csv"],
         "must have the same columns"),
        (["--input", "{dir}/missing.csv", "--label-column", "s"], "input file not found"),
        (["--input", "{dir}/bad_labels.csv", "--label-column", "s"],
         r"column 's' \(--label-column\) must contain only 0 \(unlabeled\) and 1 "
         r"\(labeled positive\); found 2$"),
        (["--input", "{dir}/table.csv", "--label-column", "x1"],  # a float column
         r"error: column 'x1' \(--label-column\) must contain only 0 \(unlabeled\) and 1 "
         r"\(labeled positive\); found continuous values such as "),
        (["--input", "{dir}/table.csv", "--label-column", "s", "--drop-columns", "nope"],
         r"--drop-columns: no such column\(s\) \['nope'\]"),
    ],
)
def test_errors_exit_2_with_a_message(frame, small_weights, tmp_path, capsys, args,
                                      message) -> None:
    frame.to_csv(tmp_path / "table.csv", index=False)
    frame.drop(columns="colour").to_csv(tmp_path / "other.csv", index=False)
    frame.assign(s=frame["s"] * 2).to_csv(tmp_path / "bad_labels.csv", index=False)
    argv = ["predict", *[a.format(dir=tmp_path) for a in args], "--weights", str(small_weights)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: ")
    assert re.search(message, error), error


def test_info_prints_config_and_parameter_counts(small_weights) -> None:
    done = subprocess.run([sys.executable, "-m", "puicl_model.cli", "info", str(small_weights)],
                          capture_output=True, text=True, check=True)
    assert '"embed_dim": 32' in done.stdout
    assert "blocks 23,584, decoder 1,682, total 25,426" in done.stdout


def test_preprocessing_options_reach_the_classifier(frame, small_weights, tmp_path) -> None:
    frame.to_csv(tmp_path / "table.csv", index=False)
    out = tmp_path / "scores.csv"
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--drop-columns", "id", "--weights", str(small_weights), "--output", str(out),
                 "--numeric", "standard", "--categorical", "ordinal", "--no-progress"]) == 0
    features = frame.drop(columns=["id", "s"])
    clf = PUICLClassifier(weights=small_weights, random_state=0, numeric="standard",
                          categorical="ordinal").fit(features, frame["s"])
    expected = clf.predict_proba(features[frame["s"] == 0])[:, 1]
    np.testing.assert_allclose(pd.read_csv(out)["p_positive"], expected, rtol=0, atol=1e-6)
    default = PUICLClassifier(weights=small_weights, random_state=0).fit(features, frame["s"])
    assert not np.allclose(default.predict_proba(features[frame["s"] == 0])[:, 1], expected)
