"""Columns are never dropped or re-typed silently: stray missing-value tokens in numeric
columns, all-missing, constant and identifier-like columns."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_wine
from sklearn.metrics import roc_auc_score

from puicl_model import PUICLClassifier
from puicl_model.estimator.columns import as_numeric
from puicl_model.estimator.preprocessing import TablePreprocessor


def wine_pu_task() -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Wine as a PU task: class 0 positive, every other positive labeled; (X, s, y)."""
    data = load_wine(as_frame=True)
    X, y = data.data, (data.target == 0).to_numpy().astype(int)
    s = np.zeros(len(y), dtype=int)
    s[np.flatnonzero(y == 1)[::2]] = 1
    return X, s, y


def with_stray_tokens(X: pd.DataFrame) -> pd.DataFrame:
    """The table as pandas reads it from a CSV with one '?' in three numeric columns."""
    dirty = X.copy().astype({"proline": object, "flavanoids": object, "alcohol": object})
    dirty.loc[3, "proline"], dirty.loc[10, "flavanoids"], dirty.loc[20, "alcohol"] = "?", "?", "?"
    text = io.StringIO()
    dirty.to_csv(text, index=False)
    text.seek(0)
    return pd.read_csv(text)


def test_one_stray_token_keeps_the_column_numeric_with_one_missing_value() -> None:
    X, s, y = wine_pu_task()
    dirty = with_stray_tokens(X)
    assert not pd.api.types.is_numeric_dtype(dirty["proline"])  # pandas reads it as text
    with pytest.warns(UserWarning, match=r"read as numeric.*'proline' \('\?' ×1\)"):
        pre = TablePreprocessor().fit(dirty)
    kinds = {column.name: column.kind for column in pre.columns_}
    assert kinds["proline"] == kinds["flavanoids"] == kinds["alcohol"] == "numeric"
    assert pre.dropped_features_ == []
    assert np.isnan(as_numeric(dirty["proline"].to_numpy())).sum() == 1

    unlabeled = s == 0
    clean_clf = PUICLClassifier(random_state=0).fit(X, s)
    clean_auc = roc_auc_score(y[unlabeled], clean_clf.predict_proba(X[unlabeled])[:, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dirty_clf = PUICLClassifier(random_state=0).fit(dirty, s)
    dirty_auc = roc_auc_score(y[unlabeled], dirty_clf.predict_proba(dirty[unlabeled])[:, 1])
    assert abs(dirty_auc - clean_auc) <= 0.005, (clean_auc, dirty_auc)


@pytest.mark.parametrize("token", ["?", "n/a", "NA", "na", "-", "", " null ", "None", "nan"])
def test_each_usual_missing_token_reads_as_missing(token: str) -> None:
    X = pd.DataFrame({"a": ["1.5", token, "3", "4"], "b": [1.0, 2.0, 3.0, 5.0]})
    pre = TablePreprocessor(numeric="standard")
    pre.fit(X)  # a token pandas already reads as NaN needs no warning; either way it is numeric
    assert pre.columns_[0].kind == "numeric"
    assert pre.columns_[0].fill == 3.0  # the median of 1.5, 3, 4


def test_real_text_stays_categorical() -> None:
    X = pd.DataFrame({"a": ["1.5", "?", "three", "4"], "b": [1.0, 2.0, 3.0, 5.0]})
    with pytest.warns(UserWarning, match=r"mostly numbers.*'a' \(67% numbers; text 'three' ×1\)"):
        pre = TablePreprocessor().fit(X)
    assert pre.columns_[0].kind == "categorical"


def test_numbers_with_a_stray_word_are_named_when_read_as_categories() -> None:
    """A column of numbers with "x" in a fifth of its rows becomes categories (an "is x"
    feature, in effect): the warning names the column and the text that did it."""
    rng = np.random.default_rng(0)
    amounts = rng.normal(size=50).round(3).astype(object)
    amounts[::5] = "x"
    amounts[1] = "?"  # a missing-value token is no stray word
    X = pd.DataFrame({"amount": amounts, "colour": rng.choice(["red", "blue", "3"], size=50),
                      "b": rng.normal(size=50)})
    with pytest.warns(UserWarning) as caught:
        pre = TablePreprocessor().fit(X)
    assert pre.columns_[0].kind == "categorical"
    messages = [str(warning.message) for warning in caught]
    assert any(message.startswith("read as categorical although mostly numbers")
               and message.endswith(": 'amount' (80% numbers; text 'x' ×10)")
               for message in messages), messages
    assert not any("'colour'" in message for message in messages)


def test_a_column_of_words_and_booleans_is_not_called_numbers() -> None:
    X = pd.DataFrame({"flag": np.array([True, False, "maybe", True] * 5, dtype=object),
                      "word": ["a", "b", "1", "c"] * 5, "b": np.arange(20.0) ** 2 + 0.5})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TablePreprocessor().fit(X)


def test_dropped_columns_are_named_with_their_reasons() -> None:
    rows = 20
    X = pd.DataFrame({
        "signal": np.linspace(0.0, 1.0, rows),
        "empty": [np.nan] * rows,
        "same": [7] * rows,
        "id": [f"r{i}" for i in range(rows)],
    })
    with pytest.warns(UserWarning) as caught:
        pre = TablePreprocessor().fit(X)
    assert pre.dropped_reasons_ == {
        "empty": "every value missing",
        "same": "constant: every value is 7",
        "id": "an identifier: 20 different values in 20 rows",
    }
    messages = [str(w.message) for w in caught]
    assert messages == [
        "dropped as identifiers (whole numbers or text, a different value in nearly every row; "
        "keep_columns, or puicl predict --keep-columns, keeps one as a feature): 'id' (20 "
        "different values in 20 rows)",
        "dropped columns that carry no information: 'empty' (every value missing); 'same' "
        "(constant: every value is 7)",
    ]


def test_text_with_a_different_value_in_every_row_of_a_few_rows_is_constant() -> None:
    rows = 18  # more distinct texts than one-hot encodes: frequency-encoded, constant
    X = pd.DataFrame({"signal": np.linspace(0.0, 1.0, rows),
                      "id": [f"r{i}" for i in range(rows)]})
    with pytest.warns(UserWarning, match="dropped columns that carry no information"):
        pre = TablePreprocessor().fit(X)
    assert pre.dropped_reasons_ == {
        "id": "text with a different value in every row (an identifier?)"}


def test_a_clean_table_fits_without_warnings() -> None:
    X, _, _ = wine_pu_task()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TablePreprocessor().fit(X)


def test_a_saved_index_is_dropped_as_an_identifier_and_other_integers_are_kept() -> None:
    X, s, y = wine_pu_task()
    order = np.argsort(-s, kind="stable")  # labeled positives first, as a user might sort
    X, s, y = X.iloc[order].reset_index(drop=True), s[order], y[order]
    text = io.StringIO()
    X.to_csv(text)  # pandas writes the index as a first column without a header
    text.seek(0)
    with_index = pd.read_csv(text)
    assert with_index.columns[0] == "Unnamed: 0"
    # integers that do not count up row by row are a feature like any other
    with_index["counts"] = np.arange(len(X)) % 7
    with pytest.warns(UserWarning, match=r"'Unnamed: 0' \(178 different whole numbers in 178 "
                                         r"rows\)"):
        clf = PUICLClassifier(random_state=0).fit(with_index, s)
    assert clf.preprocessor_.dropped_features_ == ["Unnamed: 0"]
    unlabeled = s == 0
    # the index would tell the model which rows are the labeled ones; without it the scores
    # rank the classes as on the clean table
    auc = roc_auc_score(y[unlabeled], clf.predict_proba(with_index[unlabeled])[:, 1])
    assert auc > 0.95, auc


def test_dates_and_durations_are_read_as_seconds() -> None:
    rows = 40
    rng = np.random.default_rng(0)
    days = rng.permutation(rows)
    dates = pd.Timestamp("2021-03-01") + pd.to_timedelta(days, unit="D")
    X = pd.DataFrame({
        "when": dates,
        "when_tz": dates.tz_localize("UTC").tz_convert("Asia/Tokyo"),
        "month": pd.PeriodIndex(dates, freq="D"),
        "took": pd.to_timedelta(days, unit="h"),
    })
    X.loc[5, "when"] = pd.NaT
    pre = TablePreprocessor(numeric="standard").fit(X)
    assert [column.kind for column in pre.columns_] == ["numeric"] * 4
    assert not pre.has_categorical_ and pre.dropped_features_ == []
    seconds = (dates - pd.Timestamp("1970-01-01")).total_seconds().to_numpy()
    encoded = pre.transform(X).astype(np.float64)
    for j in (1, 2):  # a time zone and a period give the same instants
        assert np.allclose(encoded[:, j], encoded[:, 1], atol=1e-6)
    assert np.corrcoef(encoded[:, 1], seconds)[0, 1] > 0.999999
    assert np.corrcoef(encoded[:, 3], days)[0, 1] > 0.999999
    assert pre.columns_[0].fill == np.median(np.delete(seconds, 5))  # NaT: a missing value


@pytest.mark.parametrize("direction", ["numbers, then dates", "dates, then numbers"])
def test_a_column_that_changes_between_numbers_and_dates_is_refused(small_weights,
                                                                    direction) -> None:
    rng = np.random.default_rng(3)
    rows = 40
    numbers = pd.DataFrame({"when": rng.normal(size=rows), "x": rng.normal(size=rows)})
    dates = numbers.assign(when=pd.Timestamp("2021-03-01")
                           + pd.to_timedelta(rng.permutation(rows), unit="D"))
    fitted, given = (numbers, dates) if direction.startswith("numbers") else (dates, numbers)
    s = np.r_[np.ones(10, dtype=int), np.zeros(rows - 10, dtype=int)]
    clf = PUICLClassifier(weights=small_weights, progress=False).fit(fitted, s)
    before = clf.predict_proba(fitted[s == 0])
    with pytest.raises(ValueError) as refused:
        clf.predict_proba(given[s == 0])
    held = ("dates or durations", "other values")
    now, then = held if direction.endswith("dates") else held[::-1]
    assert str(refused.value) == (f"column 'when' holds {now}, but it held {then} in fit; "
                                  "pass it as in fit")
    np.testing.assert_array_equal(clf.predict_proba(fitted[s == 0]), before)


def table_with_missing(share_labeled: float, share_pool: float) -> tuple[pd.DataFrame,
                                                                          np.ndarray]:
    """100 labeled rows and 300 unlabeled ones; column 'b' missing on the given shares."""
    rng = np.random.default_rng(8)
    s = np.r_[np.ones(100, dtype=int), np.zeros(300, dtype=int)]
    X = pd.DataFrame({"a": rng.normal(size=400) + s, "b": rng.normal(size=400)})
    gone = np.r_[np.arange(100) < round(100 * share_labeled),
                 np.arange(300) < round(300 * share_pool)]
    X.loc[gone, "b"] = np.nan
    return X, s


@pytest.mark.parametrize("share", [0.9, 0.95, 0.99])
def test_a_column_missing_on_most_labeled_rows_is_reported(small_weights, share) -> None:
    X, s = table_with_missing(share, 0.0)
    with pytest.warns(UserWarning) as caught:
        PUICLClassifier(weights=small_weights, progress=False).fit(X, s)
    said = [str(w.message) for w in caught if "one side of s" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(
        "missing far more often on one side of s than on the other: 'b' (missing on "
        f"{share:.0%} of the labeled rows, 0% of the unlabeled). Missingness that tells")


@pytest.mark.parametrize(("labeled", "pool"), [(0.3, 0.1), (0.5, 0.5), (0.0, 0.4)])
def test_missing_values_spread_over_both_sides_are_not_reported(small_weights, labeled,
                                                                pool) -> None:
    X, s = table_with_missing(labeled, pool)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PUICLClassifier(weights=small_weights, progress=False).fit(X, s)
    assert not [w for w in caught if "one side of s" in str(w.message)]


def test_a_complex_column_is_refused() -> None:
    X = pd.DataFrame({"z": np.arange(5) * (1 + 1j), "x": np.arange(5.0)})
    with pytest.raises(ValueError, match="column 'z' holds complex numbers"):
        TablePreprocessor().fit(X)
