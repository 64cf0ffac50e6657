"""``puicl predict`` / ``puicl info`` on CSV files, in both input layouts."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.files.cli import main


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
    np.testing.assert_array_equal(result["p_positive"], expected)  # written in full precision
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
    done = subprocess.run([sys.executable, "-m", "puicl_model.files.cli", "info",
                           str(small_weights)],
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


def scores_text(path) -> list[str]:
    """The ``p_positive,label`` part of each line of a written CSV, as text."""
    return [line.split(",", 1)[1] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", ["consecutive", "shuffled", "hashed"])
def test_an_identifier_gives_byte_identical_scores_in_both_layouts(kind, small_weights, rng,
                                                                    tmp_path, capsys) -> None:
    n = 80
    counting = np.arange(70_000, 70_000 + n)
    ids = {"consecutive": counting, "shuffled": rng.permutation(counting),
           "hashed": rng.integers(2**40, 2**62, size=n)}[kind]
    table = pd.DataFrame({"customer_id": ids, "x1": rng.normal(size=n),
                          "x2": rng.normal(size=n), "colour": rng.choice(["red", "blue"], n)})
    table["s"] = 0
    table.loc[rng.choice(n, 25, replace=False), "s"] = 1
    table.to_csv(tmp_path / "table.csv", index=False)
    table[table.s == 1].drop(columns="s").to_csv(tmp_path / "pos.csv", index=False)
    table[table.s == 0].drop(columns="s").to_csv(tmp_path / "unl.csv", index=False)
    common = ["--weights", str(small_weights), "--no-progress"]
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "-o", str(tmp_path / "one.csv"), *common]) == 0
    one = capsys.readouterr()
    assert main(["predict", "--positives", str(tmp_path / "pos.csv"), "--unlabeled",
                 str(tmp_path / "unl.csv"), "-o", str(tmp_path / "two.csv"), *common]) == 0
    two = capsys.readouterr()
    assert scores_text(tmp_path / "one.csv") == scores_text(tmp_path / "two.csv")
    for printed in (one, two):
        assert f"'customer_id' ({n} different whole numbers in {n} rows)" in printed.err
    assert one.out.split("\n", 1)[1] == two.out.split("\n", 1)[1]  # π̂ and its report
    # kept as a feature where asked: then the scores move
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "-o", str(tmp_path / "kept.csv"), "--keep-columns", "customer_id",
                 *common]) == 0
    assert "identifier" not in capsys.readouterr().err
    assert scores_text(tmp_path / "kept.csv") != scores_text(tmp_path / "one.csv")
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--keep-columns", "id", *common]) == 2
    assert capsys.readouterr().err == ("puicl predict: error: --keep-columns: no such feature "
                                       "column(s) ['id']\n")


def test_the_help_names_parquet_and_every_default(capsys) -> None:
    from puicl_model.files.cli import _parser

    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "CSV or Parquet" in text
    subparsers = next(a for a in _parser()._actions if a.dest == "command")
    for command, parser in subparsers.choices.items():
        for action in parser._actions:
            if action.dest in ("help", "input", "label_column", "positives", "unlabeled"):
                continue  # (the input files have no default)
            if action.option_strings or action.nargs == "?":  # every optional one
                assert "default: " in action.help, (command, action.dest)


def test_the_help_says_what_the_portfolio_bags_fit(capsys) -> None:
    from puicl_model.estimator.learners import CrossFittedLearner
    from puicl_model.estimator.portfolio import (
        BAGGED,
        BAGGED_BOOSTED,
        MEMBERS,
        MEMBERS_WITH_EVIDENCE,
    )

    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # (what the bags fit, and where: if that changes, so must the help)
    assert "Forest" in type(CrossFittedLearner(BAGGED, 5)._estimator(0)).__name__
    assert "Boosting" in type(CrossFittedLearner(BAGGED_BOOSTED, 5)._estimator(0)).__name__
    assert BAGGED_BOOSTED not in MEMBERS and BAGGED_BOOSTED in MEMBERS_WITH_EVIDENCE
    assert "PU bagging of small random forests" in text
    assert "(and of short boostings where evidence is read or the table is wide)" in text
    from puicl_model.estimator.prior import DEFAULT_FOLDS, PRIOR_POOL_ROWS

    assert (DEFAULT_FOLDS, PRIOR_POOL_ROWS) == (2, 2000)  # (the help names both)
    assert "on two cross-fitted folds below where the pool has more than 2,000 rows" in text


def test_info_without_a_path_describes_the_bundled_model(capsys) -> None:
    from puicl_model.net.weights import bundled_weights_path, stored_checksum

    if bundled_weights_path() is None:
        pytest.skip("no bundled checkpoint in this installation")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"weights: {bundled_weights_path()}  (the model bundled with puicl")
    assert f"tensors_sha256: {stored_checksum(bundled_weights_path())}\n" in out
    assert '"embed_dim": ' in out and "parameters: " in out
