"""``puicl predict``: the output path, the two-file layout's columns, and columns that are
read as numeric or dropped; a saved index, duplicate names, empty tables and
one-line errors (a new user's walkthrough)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model.files.cli import main


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
                     "give the path of a CSV or Parquet file\n")


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


def one_table(path, small_weights, *extra: str) -> list[str]:
    """argv of ``puicl predict`` on ``path`` with label column ``s``."""
    return ["predict", "--input", str(path), "--label-column", "s",
            "--weights", str(small_weights), *extra]


def one_line_error(capsys) -> str:
    """The error ``main`` printed, checked to be exactly one line; without its prefix."""
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.endswith("\n"), repr(error)
    assert error.startswith("puicl predict: error: "), error
    return error.removeprefix("puicl predict: error: ").rstrip("\n")


@pytest.mark.parametrize("inside", ["three.csv/out.csv", "three.csv/sub/out.csv"])
def test_output_under_a_file_is_refused_before_the_model_runs(table, small_weights, tmp_path,
                                                              capsys, monkeypatch,
                                                              inside) -> None:
    from puicl_model.estimator.classifier import PUICLClassifier

    def fit(*args, **kwargs):
        raise AssertionError("the model ran before the output path was checked")

    monkeypatch.setattr(PUICLClassifier, "fit", fit)
    table.to_csv(tmp_path / "table.csv", index=False)
    (tmp_path / "three.csv").write_text("a file\n")
    out = tmp_path / inside
    assert main(one_table(tmp_path / "table.csv", small_weights, "-o", str(out))) == 2
    assert one_line_error(capsys) == (f"--output {out}: {tmp_path / 'three.csv'} exists and is "
                                      "not a directory")
    assert (tmp_path / "three.csv").read_text() == "a file\n"


def test_an_error_while_writing_the_output_is_a_one_line_error(table, small_weights, tmp_path,
                                                               capsys, monkeypatch) -> None:
    def refuse(path, suffix=""):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("puicl_model.files.table_io.atomic_output", refuse)
    table.to_csv(tmp_path / "table.csv", index=False)
    out = tmp_path / "out.csv"
    assert main(one_table(tmp_path / "table.csv", small_weights, "-o", str(out))) == 2
    assert one_line_error(capsys) == f"cannot write --output {out}: Permission denied"


def test_empty_output_path_is_refused(table, small_weights, tmp_path, capsys) -> None:
    table.to_csv(tmp_path / "table.csv", index=False)
    assert main(one_table(tmp_path / "table.csv", small_weights, "-o", "")) == 2
    assert one_line_error(capsys) == "--output must be a file path, got an empty string"


def scores(argv: list[str], capsys) -> tuple[pd.DataFrame, str]:
    """(the CSV ``main(argv)`` wrote to stdout, its stderr)."""
    assert main(argv) == 0
    captured = capsys.readouterr()
    return pd.read_csv(pd.io.common.StringIO(captured.out)), captured.err


def test_a_saved_index_is_not_a_feature(table, small_weights, tmp_path, capsys) -> None:
    # numbered with the positives first, then shuffled: a saved index that separates them
    # perfectly and is not in row order
    table = table.sort_values("s", ascending=False, ignore_index=True)
    table = table.sample(frac=1, random_state=0)
    # a second column without a header holds fractions: a feature, kept as before
    table.insert(2, "u", np.round(table["x1"] * 3, 2))
    table.to_csv(tmp_path / "named.csv", index=False)
    with_index = table.rename(columns={"u": ""})
    with_index.to_csv(tmp_path / "indexed.csv")  # index=True: the header starts with ','
    assert (tmp_path / "indexed.csv").read_text().startswith(",x1,x2,,x3,s\n")

    expected, quiet = scores(one_table(tmp_path / "named.csv", small_weights), capsys)
    got, notes = scores(one_table(tmp_path / "indexed.csv", small_weights), capsys)
    pd.testing.assert_frame_equal(got, expected)
    assert "saved index" not in quiet
    assert notes.count("saved index") == 1
    assert (f"puicl predict: note: {tmp_path / 'indexed.csv'}: column 1 has no header and holds "
            "distinct whole numbers: a saved index; not used as a feature\n") in notes
    # naming it, as users did before it was left out, is still accepted
    again, _ = scores(one_table(tmp_path / "indexed.csv", small_weights,
                                "--drop-columns", "Unnamed: 0"), capsys)
    pd.testing.assert_frame_equal(again, expected)


def test_a_saved_index_in_the_two_file_layout(table, small_weights, tmp_path, capsys) -> None:
    plain = split(table, tmp_path, ["x1", "x2", "x3"])
    expected, _ = scores(["predict", *plain, "--weights", str(small_weights)], capsys)
    # each file keeps its rows' numbers in the original table: the positives' are a feature
    # that tells them apart from the unlabeled rows only by where they came from
    table[table.s == 1].drop(columns="s").to_csv(tmp_path / "pos.csv")
    table[table.s == 0].drop(columns="s").to_csv(tmp_path / "unl.csv")
    got, notes = scores(["predict", *plain, "--weights", str(small_weights)], capsys)
    pd.testing.assert_frame_equal(got, expected)
    for name in ("pos.csv", "unl.csv"):
        assert f"note: {tmp_path / name}: column 1 has no header and holds distinct" in notes


@pytest.mark.parametrize("layout", ["one table", "two files"])
def test_duplicate_column_names_are_refused(small_weights, tmp_path, capsys, layout) -> None:
    rows = "".join(f"{i},{i % 3},{i % 5},{int(i < 8)}\n" for i in range(20))
    (tmp_path / "table.csv").write_text("a,a,c,s\n" + rows)
    for name in ("other.csv", "more.csv"):
        (tmp_path / name).write_text("a,c,a\n1,2,3\n4,5,6\n")
    if layout == "one table":
        argv = one_table(tmp_path / "table.csv", small_weights)
        name = "table.csv"
    else:
        argv = ["predict", "--positives", str(tmp_path / "other.csv"),
                "--unlabeled", str(tmp_path / "more.csv"), "--weights", str(small_weights)]
        name = "other.csv"
    assert main(argv) == 2
    assert one_line_error(capsys) == (f"{tmp_path / name} has duplicate column names ['a']; "
                                      "give each column its own name")


def test_dropping_the_label_column_is_refused(table, small_weights, tmp_path, capsys) -> None:
    table.to_csv(tmp_path / "table.csv", index=False)
    assert main(one_table(tmp_path / "table.csv", small_weights, "--drop-columns", "s")) == 2
    assert one_line_error(capsys) == ("--drop-columns: 's' is the label column (--label-column); "
                                      "it is read as the label and cannot be dropped")


@pytest.mark.parametrize("layout", ["one table", "two files"])
def test_a_file_with_only_a_header_has_no_data_rows(table, small_weights, tmp_path, capsys,
                                                    layout) -> None:
    if layout == "one table":
        table.iloc[:0].to_csv(tmp_path / "table.csv", index=False)
        argv, empty = one_table(tmp_path / "table.csv", small_weights), "table.csv"
    else:
        argv = ["predict", *split(table, tmp_path, ["x1", "x2", "x3"]),
                "--weights", str(small_weights)]
        table.iloc[:0][["x1", "x2", "x3"]].to_csv(tmp_path / "unl.csv", index=False)
        empty = "unl.csv"
    assert main(argv) == 2
    assert one_line_error(capsys) == f"{tmp_path / empty} has no data rows"


def test_a_table_of_only_the_label_column_has_no_features(table, small_weights, tmp_path,
                                                          capsys) -> None:
    table[["s"]].to_csv(tmp_path / "table.csv", index=False)
    assert main(one_table(tmp_path / "table.csv", small_weights)) == 2
    assert one_line_error(capsys) == (f"{tmp_path / 'table.csv'} has no feature columns besides "
                                      "the label column 's'")


def test_pandas_errors_are_printed_on_one_line(small_weights, tmp_path, capsys) -> None:
    # pandas ends this message with a newline
    (tmp_path / "table.csv").write_text("x1,x2,s\n1,2,1\n3,4,5,0\n5,6,0\n")
    assert main(one_table(tmp_path / "table.csv", small_weights)) == 2
    assert one_line_error(capsys).endswith("Expected 3 fields in line 3, saw 4")
