"""Text columns as users mean them: ISO 8601 dates in text are read as the date column they
are, a column of numbers with a few stray words keeps its numbers, and a column that looks
like dates but cannot be read as dates is named with why; alike in the classifier (pandas
frames, numpy arrays) and in ``puicl predict`` (a CSV, decided from every row of the file). A
classifier saved before these readings reads its columns as it was fitted."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.columns import moments_in_seconds
from puicl_model.estimator.preprocessing import TablePreprocessor
from puicl_model.estimator.text_readings import (
    DATES,
    NUMBERS,
    STRAY_SHARE,
    ZONED_DATES,
    TextTally,
)
from puicl_model.files.cli import main
from tests.expected_scores import in_memory_scores_csv

SAVED = Path(__file__).parent / "data" / "text_columns"


def tally(cells: list) -> TextTally:
    return TextTally().add(np.array(cells, dtype=object))


# ------------------------------------------------------------------------ the readings
def test_numbers_with_at_most_one_stray_cell_in_twenty_are_read_as_numbers() -> None:
    numbers = [str(v) for v in np.linspace(0, 1, 299)]
    read = tally([*numbers, "abc", None, "?"])  # a missing cell and a token are no strays
    assert (read.reading(), read.present, read.strays(NUMBERS)) == (NUMBERS, 300, 1)
    assert read.stray_note(NUMBERS) == "1 of its 300 cells (0.3%): 'abc' ×1"
    assert tally([*numbers[:19], "x"]).reading() == NUMBERS  # 5 %: the most
    assert tally([*numbers[:18], "x", "y"]).reading() is None  # 10 %: text
    assert tally(["a", "b", "c"]).reading() is None
    assert STRAY_SHARE == 0.05


@pytest.mark.parametrize("cells", [
    ["2024-03-01", "2024-12-31"],
    ["2024-03-01 12:30:00", "2024-03-02 00:00:00"],
    ["2024-03-01T12:30:00", "2024-03-01T12:30:00.250"],  # fractions where there are some
    ["2024-03-01 12:30", " 2024-03-02 "],
    ["2024-03-01", "2024-03-01 12:30:00"],  # ISO 8601, with and without the time
])
def test_iso_8601_dates_are_read_as_dates(cells) -> None:
    assert tally(cells).reading() == DATES


def test_dates_with_a_time_zone_are_read_in_utc() -> None:
    assert tally(["2024-03-01T12:30:00Z", "2024-06-01T12:30:00+02:00"]).reading() == ZONED_DATES


def test_what_looks_like_dates_but_is_not_read_as_dates_says_why() -> None:
    iso = [f"2024-03-{day:02d}" for day in range(1, 29)] * 4
    read = tally([*iso, "2024-02-30", "unknown"])  # an invalid date and a word: strays
    assert (read.reading(), read.strays(DATES)) == (DATES, 2)
    slashed = [f"{day:02d}/03/2024" for day in range(1, 29)]
    assert tally(slashed).reading() is None
    assert "written as '01/03/2024', not in ISO 8601" in tally(slashed).dates_refused()
    mixed = tally(iso + slashed)
    assert mixed.reading() is None
    assert mixed.dates_refused().startswith("mixed formats: 28 of 140 cells are not ISO 8601")
    zones = tally([*iso[:50], *(f"{day}T10:00:00Z" for day in iso[:50])])
    assert zones.reading() is None
    assert "have a time zone and 50 have none" in zones.dates_refused()
    assert tally(["a", "b", "3"]).dates_refused() is None  # no dates: nothing to say


# -------------------------------------------------------------------------- classifier
def stray_frame(rows: int = 300) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(4)
    s = (np.arange(rows) % 4 == 0).astype(int)
    amount = rng.normal(size=rows) + s
    frame = pd.DataFrame({"amount": amount.astype(str).astype(object), "x": rng.normal(size=rows)})
    frame.loc[7, "amount"] = "abc"
    return frame, s


@pytest.mark.parametrize("container", ["DataFrame", "numpy"])
def test_a_column_of_numbers_with_one_stray_word_keeps_its_numbers(container) -> None:
    frame, s = stray_frame()
    clean = frame.assign(amount=pd.to_numeric(frame["amount"], errors="coerce"))
    X = frame if container == "DataFrame" else frame.to_numpy()
    name = "amount" if container == "DataFrame" else "0"
    with pytest.warns(UserWarning, match=rf"cells that are not numbers .* read as missing values, "
                                         rf"here and .*'{name}' \(1 of its 300 cells \(0.3%\): "
                                         r"'abc' ×1\)") as caught:
        read = TablePreprocessor().fit(X, s == 1)
    assert not any("identifier" in str(w.message) for w in caught)  # (it was dropped as one)
    expected = TablePreprocessor().fit(clean, s == 1)
    assert read.kept_features_ == [name, "1" if name == "0" else "x"]
    assert read.transform(X).tobytes() == expected.transform(clean).tobytes()


def test_a_column_with_more_stray_words_stays_text() -> None:
    frame, s = stray_frame()
    frame.loc[:19, "amount"] = "n/k"  # 20 of 300: beyond 5 %
    with pytest.warns(UserWarning, match=r"read as categorical although mostly numbers.*more "
                                         r"than 5% of their cells"):
        read = TablePreprocessor().fit(frame, s == 1)
    assert read.columns_[0].kind == "categorical"


def dated_table(rows: int = 400) -> tuple[pd.DataFrame, np.ndarray]:
    """A user's table: dates (with milliseconds, in nanoseconds, the unit pandas 2 gives), a
    date-time with a time zone, numbers with missing values, a category, a flag, an ID."""
    rng = np.random.default_rng(11)
    y = rng.random(rows) < 0.4
    s = (y & (rng.random(rows) < 0.5)).astype(int)
    start = pd.Timestamp("2023-01-01")
    frame = pd.DataFrame({
        "id": rng.permutation(10**6)[:rows],
        "amount": np.where(rng.random(rows) < 0.1, np.nan, rng.normal(size=rows) + y),
        "city": rng.choice(["north", "south", "east"], rows),
        "flag": rng.random(rows) < 0.5,
        "day": start + pd.to_timedelta(rng.integers(0, 700, rows) + 40 * y, unit="D"),
        "moment": pd.Series(start + pd.to_timedelta(rng.integers(0, 10**11, rows), unit="ms")
                            ).astype("datetime64[ns]"),
        "zoned": (start + pd.to_timedelta(rng.integers(0, 10**8, rows), unit="s")
                  ).tz_localize("Europe/Paris"),
    })
    frame.loc[rng.random(rows) < 0.05, "day"] = pd.NaT
    return frame, s


def test_a_csv_and_a_parquet_file_of_one_table_score_the_same_bytes_in_memory(
        small_weights, tmp_path) -> None:
    frame, s = dated_table()
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    scores = {}
    for name, X in (("csv", pd.read_csv(tmp_path / "t.csv")),
                    ("parquet", pd.read_parquet(tmp_path / "t.parquet"))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
        notes = " ".join(str(w.message) for w in caught)
        assert ("read as dates (ISO 8601 text" in notes) == (name == "csv")
        assert [column.kind for column in clf.preprocessor_.columns_] == [
            "numeric", "numeric", "categorical", "categorical", "numeric", "numeric", "numeric"]
        scores[name] = clf.predict_proba(X[s == 0]).tobytes()
        # a fitted text column of dates reads a date column too, the same
        assert clf.predict_proba(frame[s == 0]).tobytes() == scores[name]
    assert scores["csv"] == scores["parquet"]


def test_dates_seconds_do_not_depend_on_the_unit() -> None:
    dates = pd.Series(pd.to_datetime(["2024-03-01 12:30:00.123", "1999-12-31 23:59:59.999",
                                      "2024-03-01 12:30:00.123457", None]))
    micro = np.array([1709296200123000, 946684799999000, 1709296200123457, 0])
    whole, rest = np.divmod(micro, 10**6)
    expected = np.where([True, True, True, False], whole + rest / 1e6, np.nan)
    for unit in ("us", "ns"):
        seconds = moments_in_seconds(dates.astype(f"datetime64[{unit}]"))
        assert seconds.tobytes() == expected.tobytes(), unit
    assert moments_in_seconds(dates[:2].astype("datetime64[ms]")).tobytes() == \
        expected[:2].tobytes()
    # (unit_free=False: pandas' own, for classifiers fitted before; pandas 2 divides the
    # count by the unit's ticks, a bit apart in nanoseconds)
    ns = dates.astype("datetime64[ns]")
    assert moments_in_seconds(ns, unit_free=False).tobytes() == (
        ns - pd.Timestamp("1970-01-01")).dt.total_seconds().to_numpy().tobytes()


def test_a_fitted_text_column_of_dates_refuses_numbers_and_reads_unparsed_cells_as_missing(
        ) -> None:
    days = pd.Series(pd.date_range("2024-01-01", periods=60, freq="D").strftime("%Y-%m-%d"),
                     dtype=object)
    X = pd.DataFrame({"day": days, "x": np.linspace(0, 1, 60)})
    with pytest.warns(UserWarning, match=r"read as dates .*'day'"):
        pre = TablePreprocessor().fit(X)
    with pytest.raises(ValueError, match="column 'day' held dates written as text in fit, but "
                                         "now holds numbers"):
        pre.transform(X.assign(day=np.arange(60.0)))
    later = pre.transform(X.assign(day=["someday"] * 60))
    missing = pre.transform(X.assign(day=[None] * 60))
    assert later.tobytes() == missing.tobytes()


def test_dates_in_another_format_are_named_with_why(small_weights) -> None:
    X = pd.DataFrame({"when": [f"{1 + i % 28:02d}/0{1 + i % 9}/2024" for i in range(100)],
                      "x": np.linspace(0, 1, 100)})
    s = (np.arange(100) < 30).astype(int)
    with pytest.warns(UserWarning, match=r"read as text although they look like dates .*'when' "
                                         r"\(written as '\d\d/0\d/2024', not in ISO 8601"):
        clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    assert clf.preprocessor_.columns_[0].kind == "categorical"


# --------------------------------------------------------------------------------- CLI
def predict(argv: list[str], capsys) -> tuple[int, str]:
    code = main(["predict", *argv, "--no-progress"])
    return code, capsys.readouterr().err


def test_a_csv_and_a_parquet_file_of_one_table_score_the_same_bytes(small_weights, tmp_path,
                                                                     capsys) -> None:
    frame, s = dated_table()
    frame = frame.assign(s=s)
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    written, notes = {}, {}
    for name in ("t.csv", "t.parquet"):
        for rows in ("100000", "90"):  # a date column read in batches of every unit
            out = tmp_path / f"{name}.{rows}.csv"
            code, notes[name] = predict(["--input", str(tmp_path / name), "--label-column", "s",
                                         "--weights", str(small_weights), "--batch-rows", rows,
                                         "-o", str(out)], capsys)
            assert code == 0
            written[name, rows] = out.read_bytes()
    assert len(set(written.values())) == 1
    assert f"{tmp_path / 't.csv'}: column 'day' is read as dates (ISO 8601)" in notes["t.csv"]
    assert "column 'zoned' is read as dates (ISO 8601, with a time zone, in UTC)" in notes[
        "t.csv"]
    assert "read as dates" not in notes["t.parquet"]


def test_stray_cells_of_a_csv_are_counted_in_the_whole_file(small_weights, tmp_path,
                                                            capsys) -> None:
    frame, s = stray_frame(700)
    frame.loc[[300, 450, 650], "amount"] = ["#VALUE!", "abc", "abc"]
    path = tmp_path / "t.csv"
    frame.assign(s=s).to_csv(path, index=False)
    out = tmp_path / "scores.csv"
    code, notes = predict(["--input", str(path), "--label-column", "s", "--weights",
                           str(small_weights), "--batch-rows", "100", "-o", str(out)], capsys)
    assert code == 0
    assert (f"{path}: column 'amount' is read as numeric, the cells that are not numbers as "
            "missing values: 4 of its 700 cells (0.6%): 'abc' ×3, '#VALUE!' ×1") in notes
    assert out.read_bytes() == in_memory_scores_csv(path, small_weights)
    # a stray cell outside the fitted sample of the pool is read as in it
    code, notes = predict(["--input", str(path), "--label-column", "s", "--weights",
                           str(small_weights), "--pool-sample", "100", "-o",
                           str(tmp_path / "sampled.csv")], capsys)
    assert code == 0


def test_a_csv_column_of_mixed_date_formats_is_named_in_one_line(small_weights, tmp_path,
                                                                 capsys) -> None:
    rows = 300
    rng = np.random.default_rng(2)
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 300, rows), unit="D")
    written = np.where(np.arange(rows) % 3 == 0, days.strftime("%d/%m/%Y"),
                       days.strftime("%Y-%m-%d"))
    s = (np.arange(rows) % 4 == 0).astype(int)
    path = tmp_path / "t.csv"
    pd.DataFrame({"when": written, "x": rng.normal(size=rows), "s": s}).to_csv(path, index=False)
    code, notes = predict(["--input", str(path), "--label-column", "s", "--weights",
                           str(small_weights), "-o", str(tmp_path / "out.csv")], capsys)
    assert code == 0
    lines = [line for line in notes.splitlines() if "'when'" in line]
    assert len(lines) == 1
    assert lines[0].startswith("puicl predict: note: read as text although they look like "
                               "dates (write dates as ISO 8601")
    assert "'when' (mixed formats: 100 of 300 cells are not ISO 8601 dates (" in lines[0]


def test_the_identifier_note_names_the_rows_it_counted(small_weights, tmp_path,
                                                       capsys) -> None:
    rng = np.random.default_rng(3)
    rows = 600
    s = (np.arange(rows) % 5 == 0).astype(int)
    path = tmp_path / "t.csv"
    pd.DataFrame({"id": rng.permutation(10**6)[:rows], "x": rng.normal(size=rows) + s,
                  "s": s}).to_csv(path, index=False)
    code, notes = predict(["--input", str(path), "--label-column", "s", "--weights",
                           str(small_weights), "--pool-sample", "100", "-o",
                           str(tmp_path / "out.csv")], capsys)
    assert code == 0
    assert ("'id' (220 different whole numbers in 220 rows); counted on the 220 rows fit read: "
            "120 labeled, 100 unlabeled; the unlabeled ones a seeded sample of the input's 480 "
            "(--pool-sample)") in notes


# ------------------------------------------------------------------ a classifier saved before
def test_a_classifier_saved_before_reads_its_columns_as_it_was_fitted() -> None:
    """Written by ``data/text_columns/make_folder.py`` before these readings: its text column
    of dates and its numbers with a stray word are categories, its date-times in nanoseconds
    are seconds in nanoseconds; loaded now, it encodes and scores as it did."""
    loaded = PUICLClassifier.load(SAVED / "folder", device="cpu")
    with np.load(SAVED / "expected.npz") as expected:
        expected = dict(expected)
    table = pd.read_parquet(SAVED / "table.parquet")
    new = pd.read_parquet(SAVED / "new.parquet")
    s = table.pop("s").to_numpy()
    assert [column.kind for column in loaded.preprocessor_.columns_] == [
        "categorical", "categorical", "numeric", "numeric"]
    assert loaded.preprocessor_.transform(new).tobytes() == expected["encoded"].tobytes()
    assert loaded.predict_proba(table[s == 0]).tobytes() == expected["pool"].tobytes()
    np.testing.assert_allclose(loaded.predict_proba(new), expected["new"], rtol=0, atol=1e-6)
