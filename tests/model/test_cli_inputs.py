"""``puicl predict``: the output path, the two-file layout's columns, and columns that are
read as numeric or dropped (issue 17)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model.cli import main


@pytest.fixture
def table(rng) -> pd.DataFrame:
    n = 60
    data = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                         "x3": rng.normal(size=n)})
    data["s"] = 0
    data.loc[rng.choice(n, 20, replace=False), "s"] = 1
    return data


def split(table: pd.DataFrame, tmp_path, unlabeled_columns: list[str]) -> list[str]:
    """Write pos.csv and unl.csv (the latter with ``unlabeled_columns``); the layout's args."""
    table[table.s == 1].drop(columns="s").to_csv(tmp_path / "pos.csv", index=False)
    table[table.s == 0][unlabeled_columns].to_csv(tmp_path / "unl.csv", index=False)
    return ["--positives", str(tmp_path / "pos.csv"), "--unlabeled", str(tmp_path / "unl.csv")]


def test_output_to_an_existing_directory_is_a_one_line_error(table, small_weights, tmp_path,
                                                             capsys) -> None:
    table.to_csv(tmp_path / "table.csv", index=False)
    (tmp_path / "results").mkdir()
    code = main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "results")])
    assert code == 2
    error = capsys.readouterr().err
    assert error == (f"puicl predict: error: --output {tmp_path / 'results'} is a directory; "
                     "give the path of a CSV file\n")


def test_two_files_with_the_same_columns_in_another_order(table, small_weights, tmp_path,
                                                          capsys) -> None:
    same = split(table, tmp_path, ["x1", "x2", "x3"])
    assert main(["predict", *same, "--weights", str(small_weights)]) == 0
    in_order = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    reordered = split(table, tmp_path, ["x3", "x1", "x2"])
    assert main(["predict", *reordered, "--weights", str(small_weights)]) == 0
    shuffled = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    pd.testing.assert_frame_equal(in_order, shuffled)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["x1", "x3"], r"unl\.csv lacks \['x2'\]$"),
        (["x1", "x2", "x3", "s"], r"unl\.csv has \['s'\], which .*pos\.csv lacks$"),
    ],
)
def test_two_files_with_other_columns_are_refused(table, small_weights, tmp_path, capsys,
                                                  columns, message) -> None:
    assert main(["predict", *split(table, tmp_path, columns),
                 "--weights", str(small_weights)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("puicl predict: error: ") and "\n" not in error
    assert pd.Series([error]).str.contains(message).all(), error


def test_columns_read_as_numeric_or_dropped_are_reported(table, small_weights, tmp_path,
                                                         capsys) -> None:
    dirty = table.astype({"x1": object})
    dirty.loc[0, "x1"] = "?"
    dirty["empty"] = np.nan
    dirty.to_csv(tmp_path / "table.csv", index=False)
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "out.csv")]) == 0
    error = capsys.readouterr().err
    assert "puicl predict: note: read as numeric, with these missing-value tokens as missing " \
           "values: 'x1' ('?' ×1)" in error
    assert "puicl predict: note: dropped columns that carry no information: 'empty' (every " \
           "value missing)" in error
