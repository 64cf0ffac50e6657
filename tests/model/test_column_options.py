"""The two column-reading options of the classifier: ``affine_copies`` and
``few_valued_integers`` (with ``categorical_max_levels``), both off by default."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.cli import main
from puicl_model.preprocessing import TablePreprocessor

ENCODINGS = (("quantile", "onehot"), ("power", "ordinal"), ("standard", "frequency"))


def breast_cancer() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    return load_breast_cancer(as_frame=True).data


def mixed_table() -> pd.DataFrame:
    """Categories, a constant, missing values, and what the options act on: an integer column
    of 3 values, an affine copy, an integer column of up to 50 values."""
    rng = np.random.default_rng(1)
    n = 300
    size = rng.normal(size=n)
    return pd.DataFrame({
        "size": size,
        "colour": rng.choice(["red", "green", None], size=n),
        "grade": pd.Categorical(rng.choice(["A", "B", "C"], size=n)),
        "weight": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),
        "site": "lab-1",
        "level": rng.integers(1, 4, size=n),
        "size_cm": 2.54 * size + 1.0,
        "count": rng.integers(0, 50, size=n),
    })


# sha256 of TablePreprocessor().fit_transform's float32 bytes under each encoding, recorded
# before the options existed: the defaults must give the model the same features, bit for bit
# (the model's code is untouched, so its predictions follow)
BEFORE = {
    ("breast_cancer", "quantile", "onehot"):
        "f2eefa412fd1b3e0ad06b7f0ac3ff7b15c56b21a0381c53258b65e384848e724",
    ("breast_cancer", "power", "ordinal"):
        "6c5b78c766ba20e40d51876bcc7851441fbb7fe7cb7aaae6846803e2b0dd28f6",
    ("breast_cancer", "standard", "frequency"):
        "59b2668bb4bcf212284d064794a30f307255756c165e82a583a08ed1e722a23a",
    ("mixed", "quantile", "onehot"):
        "9444152120b30aed19b5629d3b0e950306b26312db971c47c3e3fb06f24dc8ff",
    ("mixed", "power", "ordinal"):
        "32dc669ca92782e4dd15adb6a075cc260985bacf392361d46350f0e06752d9f9",
    ("mixed", "standard", "frequency"):
        "33cd482be7e362ba025e13dfd92d6a83b1aeb68f6ef5573959cb0526fd5dd3e3",
}


@pytest.mark.parametrize(("numeric", "categorical"), ENCODINGS)
def test_the_defaults_give_the_features_of_before(numeric, categorical) -> None:
    for name, table in (("breast_cancer", breast_cancer()), ("mixed", mixed_table())):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the constant column
            out = TablePreprocessor(numeric=numeric, categorical=categorical).fit_transform(table)
        assert hashlib.sha256(out.tobytes()).hexdigest() == BEFORE[name, numeric, categorical]


def test_the_defaults_keep_copies_and_read_integers_as_numbers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pre = TablePreprocessor().fit(mixed_table())
    assert "size_cm" in pre.kept_features_ and "level" in pre.kept_features_
    assert {c.name: c.kind for c in pre.columns_}["level"] == "numeric"


# ------------------------------------------------------------------------- affine copies
def with_copies(table: pd.DataFrame) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return table.assign(
        size_in=table["size"] / 2.54 - 3.0,                    # scaled and shifted
        minus_size=-4.0 * table["size"] + 1e6,                 # negated, large offset
        near=table["size"] + 1e-3 * rng.normal(size=len(table)),   # not exact: kept
    )


def test_drop_removes_scaled_and_negated_copies_and_reports_them() -> None:
    table = with_copies(pd.DataFrame({"size": np.random.default_rng(3).normal(size=80),
                                      "other": np.arange(80) % 7 * 1.5}))
    with pytest.warns(UserWarning, match="dropped columns that carry no information") as caught:
        pre = TablePreprocessor(affine_copies="drop").fit(table)
    assert pre.kept_features_ == ["size", "other", "near"]
    assert pre.dropped_reasons_ == {
        "size_in": "affine copy of 'size', positive factor",
        "minus_size": "affine copy of 'size', negative factor",
    }
    message = str(caught[0].message)
    assert "'size_in' (affine copy of 'size'" in message and "'minus_size'" in message


def test_a_copy_must_miss_the_same_rows() -> None:
    x = np.random.default_rng(4).normal(size=60)
    gappy = x.copy()
    gappy[5] = np.nan
    table = pd.DataFrame({"x": gappy, "same_gaps": 3 * gappy, "other_gaps": 3 * x})
    with pytest.warns(UserWarning, match="affine copy"):
        pre = TablePreprocessor(affine_copies="drop", missing="median+indicator").fit(table)
    # the copy goes with its "was missing" feature; a column missing elsewhere is no copy
    assert pre.dropped_features_ == ["same_gaps", "same_gaps (missing)"]
    assert pre.kept_features_ == ["x", "x (missing)", "other_gaps"]


def test_drop_gives_the_predictions_of_the_table_without_the_copies(small_weights) -> None:
    table = mixed_table()
    copied = with_copies(table)
    s = (np.arange(len(table)) < 100).astype(int)
    plain = table.drop(columns="size_cm").assign(near=copied["near"])
    fitted = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, frame in (("copied", copied), ("plain", plain)):
            fitted[name] = PUICLClassifier(weights=small_weights, affine_copies="drop",
                                           n_estimators=2, random_state=0).fit(frame, s)
    assert fitted["copied"].preprocessor_.kept_features_ == \
        fitted["plain"].preprocessor_.kept_features_
    assert "near" in fitted["plain"].preprocessor_.kept_features_
    pool = s == 0
    copies = ["size_cm", "size_in", "minus_size"]
    np.testing.assert_array_equal(fitted["copied"].predict_proba(copied[pool]),
                                  fitted["plain"].predict_proba(plain[pool]))
    # new rows are read with the same kept columns (a copy's values no longer matter)
    new = copied.iloc[:5].assign(size=copied["size"].iloc[:5] + 0.3)
    np.testing.assert_array_equal(fitted["copied"].predict_proba(new),
                                  fitted["plain"].predict_proba(new.drop(columns=copies)))


# ------------------------------------------------------------- integer columns, few values
def test_few_valued_integers_are_encoded_as_categories() -> None:
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"level": rng.integers(1, 4, size=120).astype(float),
                          "count": rng.integers(0, 50, size=120),
                          "halves": rng.integers(0, 3, size=120) + 0.5})
    table.loc[7, "level"] = np.nan
    pre = TablePreprocessor(few_valued_integers="categorical").fit(table)
    kinds = {column.name: column.kind for column in pre.columns_}
    assert kinds == {"level": "categorical", "count": "numeric", "halves": "numeric"}
    assert not pre.has_categorical_  # the member count of n_estimators=None is unchanged
    # exactly the features of the same column given as categories
    declared = table.assign(level=pd.Categorical(table["level"]))
    reference = TablePreprocessor().fit(declared)
    np.testing.assert_array_equal(pre.transform(table), reference.transform(declared))
    # the threshold: 3 values read as numbers when at most 2 levels are categories
    fewer = TablePreprocessor(few_valued_integers="categorical", categorical_max_levels=2)
    assert {c.name: c.kind for c in fewer.fit(table).columns_}["level"] == "numeric"


def test_categories_of_numbers_keep_their_order_and_unseen_numbers_are_missing() -> None:
    values = np.array([10.0, 2.0, -1.0, 2.0, 10.0, -1.0, 2.0, 10.0])
    pre = TablePreprocessor(few_valued_integers="categorical", categorical="ordinal",
                            numeric="standard").fit(values[:, None])
    assert pre.columns_[0].codes == {"float:-1.0": 0.0, "float:2.0": 1.0, "float:10.0": 2.0}
    raw = pre.transform(np.array([[-1.0], [2.0], [10.0], [5.0]]))[:, 0]
    assert raw[0] < raw[1] < raw[2] < raw[3]  # 5 was never seen: the missing code, last
    with pytest.raises(ValueError, match="column '0' holds an infinite value"):
        pre.transform(np.array([[np.inf]]))


# --------------------------------------------------------------------------- the settings
@pytest.mark.parametrize(("setting", "value", "message"), [
    ("affine_copies", "remove", "affine_copies: must be 'keep' or 'drop', got 'remove'"),
    ("few_valued_integers", "categories",
     "few_valued_integers: must be 'numeric' or 'categorical', got 'categories'"),
    ("categorical_max_levels", 1, "categorical_max_levels: must be an integer >= 2, got 1"),
    ("categorical_max_levels", 2.5, "categorical_max_levels: must be an integer >= 2, got 2.5"),
])
def test_bad_settings_are_one_line_errors_naming_the_key(small_weights, setting, value,
                                                         message) -> None:
    X = np.random.default_rng(0).normal(size=(30, 2))
    s = (np.arange(30) < 10).astype(int)
    clf = PUICLClassifier(weights=small_weights, **{setting: value})  # stored, not checked
    assert clf.get_params()[setting] == value
    with pytest.raises(ValueError) as caught:
        clf.fit(X, s)
    assert str(caught.value) == message


def test_puicl_predict_takes_both_options(small_weights, tmp_path, capsys) -> None:
    rng = np.random.default_rng(2)
    table = pd.DataFrame({"x": rng.normal(size=60), "level": rng.integers(0, 3, size=60)})
    table["x_copy"] = -2.0 * table["x"]
    table["s"] = (np.arange(60) < 20).astype(int)
    table.to_csv(tmp_path / "table.csv", index=False)
    out = tmp_path / "scores.csv"
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "--output", str(out), "--no-progress",
                 "--affine-copies", "drop", "--few-valued-integers", "categorical",
                 "--categorical-max-levels", "3"]) == 0
    assert "'x_copy' (affine copy of 'x', negative factor)" in capsys.readouterr().err
    features = table.drop(columns=["s", "x_copy"])
    clf = PUICLClassifier(weights=small_weights, few_valued_integers="categorical",
                          categorical_max_levels=3).fit(features, table["s"])
    expected = clf.predict_proba(features[table["s"] == 0])[:, 1]
    np.testing.assert_allclose(pd.read_csv(out)["p_positive"], expected, rtol=0, atol=1e-6)
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "--categorical-max-levels", "1"]) == 2
    assert capsys.readouterr().err == ("puicl predict: error: categorical_max_levels: must be "
                                       "an integer >= 2, got 1\n")
