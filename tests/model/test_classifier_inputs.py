"""What fit says about suspicious inputs: leaky columns, an inverted s, the bad value of s
itself, a table without columns; and the device "auto" picks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from puicl_common.runtime import resolve_device
from puicl_model import PUICLClassifier
from puicl_model.estimator.fitted_table import FittedTable


@pytest.fixture
def frame(rng) -> tuple[pd.DataFrame, np.ndarray]:
    n = 60
    s = (np.arange(n) % 3 == 0).astype(np.int64)  # 20 labeled, 40 unlabeled
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "colour": rng.choice(["red", "green", "blue"], size=n)})
    return X, s


def fit_messages(clf: PUICLClassifier, X, s) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X, s)
    return [str(warning.message) for warning in caught]


def test_an_ordinary_table_fits_without_a_warning(small_weights, frame) -> None:
    X, s = frame
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PUICLClassifier(weights=small_weights).fit(X, s)


@pytest.mark.parametrize("leak", ["copy", "inverted", "category"])
def test_a_column_that_separates_labeled_from_unlabeled_is_named_and_dropped(small_weights, frame,
                                                                 leak) -> None:
    X, s = frame
    X = X.assign(leak={"copy": s.astype(float), "inverted": 5.0 - 2 * s,
                       "category": np.where(s == 1, "yes", "no")}[leak])
    messages = fit_messages(PUICLClassifier(weights=small_weights), X, s)
    dropped = [m for m in messages if m.startswith("dropped columns")]
    assert len(dropped) == 1, messages
    assert ("'leak' (separates the labeled rows from the unlabeled ones: its values on the two "
            "sides do not overlap (a copy of s" in dropped[0])
    # dropped, the column cannot steer the scores: any coding of it gives the same ones
    clean = PUICLClassifier(weights=small_weights).fit(frame[0], s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        leaky = PUICLClassifier(weights=small_weights).fit(X, s)
    np.testing.assert_array_equal(leaky.predict_proba(X[s == 0]),
                                  clean.predict_proba(frame[0][s == 0]))


def test_a_clean_split_that_small_tables_give_by_chance_is_not_reported(small_weights) -> None:
    X = np.array([[5.0], [6.0], [7.0], [1.0], [2.0], [3.0], [4.0], [2.5]])
    s = np.array([1, 1, 1, 0, 0, 0, 0, 0])  # 3 of 8 rows on top: one split in 28
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PUICLClassifier(weights=small_weights).fit(X, s)


def test_more_labeled_than_unlabeled_rows_warns_that_s_may_be_inverted(small_weights,
                                                                       frame) -> None:
    X, s = frame
    messages = fit_messages(PUICLClassifier(weights=small_weights), X, 1 - s)
    assert any(m.startswith("s marks more rows labeled positive (40 rows with s = 1) than "
                            "unlabeled (20 with s = 0)") and "not inverted" in m
               for m in messages), messages


@pytest.mark.parametrize(
    ("s", "shown"),
    [
        (pd.Series(["1", "0", "x", "0", "1", "0"]), "'x' (row 2)"),
        (pd.Series([True, False, pd.NA, False, True, False], dtype=object), "<NA> (row 2)"),
        (np.array([1, 0, 0, None, 1, 0], dtype=object), "None (row 3)"),
        (np.array([1.0, 0.0, np.nan, 1.0, 0.0, 0.0]), "nan (row 2)"),
    ],
)
def test_a_non_numeric_label_names_the_bad_value(small_weights, s, shown) -> None:
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(ValueError) as caught:
        PUICLClassifier(weights=small_weights).fit(X, s)
    kind = "missing" if shown.startswith(("None", "nan")) else "non-numeric"
    assert str(caught.value) == ("s must contain only 0 (unlabeled) and 1 (labeled positive); "
                                 f"found {kind} values such as {shown}")


@pytest.mark.parametrize("table", [pd.DataFrame(index=range(300)), np.zeros((300, 0))],
                         ids=["dataframe", "array"])
def test_a_table_without_columns_is_reported_with_its_rows(small_weights, table) -> None:
    s = (np.arange(300) < 30).astype(int)
    with pytest.raises(ValueError, match=r"X has 0 feature\(s\) \(shape=\(300, 0\)\) while a "
                                         "minimum of 1 is required"):
        PUICLClassifier(weights=small_weights).fit(table, s)


@pytest.mark.parametrize(("cuda", "mps", "device", "expected"), [
    (False, True, "auto", "mps"),
    (False, False, "auto", "cpu"),
    (False, True, "cpu", "cpu"),
])
def test_auto_takes_apples_gpu_where_there_is_no_cuda(small_model, frame, monkeypatch, cuda,
                                                      mps, device, expected) -> None:
    X, s = frame
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    # the model stays on the CPU here, where no MPS device exists, and fit scores nothing
    monkeypatch.setattr("puicl_model.estimator.classifier.load_model",
                        lambda weights, device: small_model)
    monkeypatch.setattr(FittedTable, "score", lambda self, runtime: None)
    clf = PUICLClassifier(device=device).fit(X, s)
    assert clf.device_.type == expected
    # the same rule, where training keeps to CUDA and the CPU
    assert resolve_device(device, training=False) == clf.device_
    assert resolve_device(device).type == "cpu"


@pytest.mark.parametrize("side", ["labeled", "unlabeled"])
def test_a_column_missing_on_every_row_of_one_side_is_dropped_and_named(small_weights,
                                                                         side) -> None:
    """Positives from a registry that lacks a field: the median fill would make the column
    constant on one side and varied on the other, so the scores would follow it. It is dropped,
    named, and the predictions are those of the table without it."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 4))
    s = (np.arange(120) < 40).astype(int)
    gappy = X.copy()
    gappy[(s == 1) if side == "labeled" else (s == 0), 3] = np.nan
    with pytest.warns(UserWarning, match=rf"'3' \(missing on every {side} row, recorded only"):
        clf = PUICLClassifier(weights=small_weights, device="cpu").fit(gappy, s)
    without = PUICLClassifier(weights=small_weights, device="cpu").fit(X[:, :3], s)
    np.testing.assert_array_equal(clf.predict_proba(gappy[s == 0]),
                                  without.predict_proba(X[s == 0, :3]))


def test_integers_beyond_float64_precision_stay_distinct(small_weights) -> None:
    """IDs near 2**62 that differ by less than float64's step there (1,024) are not one
    value: they are read relative to the column's smallest, in integer arithmetic, and a new
    row is placed among them the same way."""
    rng = np.random.default_rng(6)
    small = rng.integers(0, 1000, 120)
    frame = pd.DataFrame({"x": rng.normal(size=120), "id": (2**62 + small).astype(np.int64)})
    s = (np.arange(120) < 40).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped as constant
        clf = PUICLClassifier(weights=small_weights, device="cpu").fit(frame, s)
    assert clf.preprocessor_.kept_features_ == ["x", "id"]
    shifted = PUICLClassifier(weights=small_weights, device="cpu").fit(
        frame.assign(id=small), s)
    np.testing.assert_array_equal(clf.predict_proba(frame[s == 0]),
                                  shifted.predict_proba(frame.assign(id=small)[s == 0]))
    new = frame.iloc[:3].assign(x=frame["x"].iloc[:3] + 0.5)
    np.testing.assert_array_equal(clf.predict_proba(new),
                                  shifted.predict_proba(new.assign(id=small[:3])))
