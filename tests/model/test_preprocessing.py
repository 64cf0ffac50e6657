"""Real tables -> model features: categorical, missing and constant columns."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from puicl_model.estimator.column_encoding import feature_labels
from puicl_model.estimator.preprocessing import TablePreprocessor


def raw_features(pre: TablePreprocessor, X) -> np.ndarray:
    """The encoded features before the (model-irrelevant) float64 centring and scaling."""
    return pre.transform(X).astype(np.float64) * pre.scale_ + pre.center_


def close(actual: np.ndarray, expected: list[float]) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)  # float32 round trip


def mixed_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "num": [1.0, np.nan, 3.0, 5.0, np.nan, 7.0],
            "text": ["b", "a", None, "c", "a", "b"],
            "cat": pd.Categorical(["x", "y", "x", "y", "x", "x"]),
            "flag": [True, False, True, True, False, True],
            "const": [4, 4, 4, 4, 4, 4],
        }
    )


def test_ordinal_encoding_median_imputation_and_constant_columns() -> None:
    pre = TablePreprocessor(categorical="ordinal", numeric="standard").fit(mixed_frame())
    assert pre.dropped_features_ == ["const"]
    encoded = raw_features(pre, mixed_frame())
    assert encoded.shape == (6, 4)
    # num: NaN -> median of 1, 3, 5, 7 = 4
    close(encoded[:, 0], [1, 4, 3, 5, 4, 7])
    # text: categories sorted a < b < c, missing after them
    close(encoded[:, 1], [1, 0, 3, 2, 0, 1])
    close(encoded[:, 2], [0, 1, 0, 1, 0, 0])
    close(encoded[:, 3], [1, 0, 1, 1, 0, 1])  # False < True
    assert pre.transform(mixed_frame()).dtype == np.float32


def test_frequency_encoding_and_missing_indicator() -> None:
    pre = TablePreprocessor(categorical="frequency", missing="median+indicator",
                            numeric="standard")
    pre.fit(mixed_frame())
    encoded = raw_features(pre, mixed_frame())
    assert encoded.shape == (6, 5)  # num, num (missing), text, cat, flag
    close(encoded[:, 1], [0, 1, 0, 0, 1, 0])
    close(encoded[:, 2], [2 / 6, 2 / 6, 1 / 6, 1 / 6, 2 / 6, 2 / 6])


def test_unseen_categories_count_as_missing_and_columns_may_be_reordered() -> None:
    pre = TablePreprocessor(categorical="ordinal").fit(mixed_frame())
    new = mixed_frame().iloc[:2].copy()
    new["text"] = ["zzz", None]
    reordered = new[["const", "flag", "cat", "text", "num"]]
    encoded = raw_features(pre, reordered)
    close(encoded[:, 1], [3, 3])  # the missing code


def test_numeric_object_columns_stay_numeric() -> None:
    X = np.array([[1, "a"], [2.5, "b"], [None, "a"]], dtype=object)
    pre = TablePreprocessor(numeric="standard").fit(X)
    assert [c.kind for c in pre.columns_] == ["numeric", "categorical"]
    close(raw_features(pre, X)[:, 0], [1, 2.5, 1.75])


@pytest.mark.parametrize(
    ("fit_X", "X", "message"),
    [
        (np.zeros((3, 4)) + np.arange(3)[:, None], np.zeros((2, 3)),
         "X has 3 columns but the classifier was fitted with 4"),
        (mixed_frame(), mixed_frame().drop(columns="num"), r"missing \['num'\]"),
        (mixed_frame(), mixed_frame().assign(extra=1), r"unexpected \['extra'\]"),
        (mixed_frame(), mixed_frame().assign(num="x"),
         "column 'num' was numeric in fit but now holds non-numeric values"),
        (np.arange(6.0).reshape(3, 2), np.array([[np.inf, 1.0]]),
         r"column '0' holds an infinite value \(row 0\)"),
    ],
)
def test_transform_errors(fit_X, X, message) -> None:
    pre = TablePreprocessor().fit(fit_X)
    with pytest.raises(ValueError, match=message):
        pre.transform(X)


def test_fit_errors() -> None:
    with pytest.raises(ValueError, match=r"column '1' holds an infinite value \(row 2\)"):
        TablePreprocessor().fit(np.array([[1.0, 2.0], [2.0, 3.0], [3.0, -np.inf]]))
    with pytest.raises(ValueError, match="1 missing values \\(NaN\\) and missing='error'"):
        TablePreprocessor(missing="error").fit(np.array([[1.0, np.nan], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="2-D table"):
        TablePreprocessor().fit(np.zeros(5))
    with pytest.raises(ValueError, match="categorical must be 'onehot', 'ordinal' or 'frequency'"):
        TablePreprocessor(categorical="target")
    with pytest.raises(ValueError,
                       match="numeric must be 'quantile', 'standard' or 'power', got 'log'"):
        TablePreprocessor(numeric="log")


def test_all_constant_table_warns_and_yields_one_zero_column() -> None:
    with pytest.warns(UserWarning, match="every feature is constant"):
        pre = TablePreprocessor().fit(np.ones((5, 3)))
    out = pre.transform(np.ones((2, 3)))
    assert out.shape == (2, 1) and (out == 0).all()


@pytest.mark.parametrize("magnitude", [1e307, 1e-200])
def test_standard_keeps_columns_at_the_ends_of_the_float64_range(magnitude) -> None:
    """Their mean or squares overflow (or underflow to a zero deviation): the column must keep
    its variation, without numpy's overflow warning, instead of collapsing to a constant."""
    rng = np.random.default_rng(0)
    spread = rng.normal(size=50)
    lone = rng.normal(size=50)
    lone[3] = 1e308  # one value at the limit in an otherwise ordinary column
    X = np.c_[spread * magnitude, lone, rng.normal(size=50)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pre = TablePreprocessor(numeric="standard")
        out = pre.fit_transform(X)
        again = pre.transform(X)
    assert np.isfinite(out).all() and np.array_equal(out, again)
    expected = (spread - spread.mean()) / spread.std()
    np.testing.assert_allclose(out[:, 0], expected, rtol=1e-5, atol=1e-5)
    assert out[3, 1] > 6 and np.ptp(np.delete(out[:, 1], 3)) < 1e-6  # the lone value stands out
    np.testing.assert_allclose(out[:, 1].mean(), 0.0, atol=1e-6)
    np.testing.assert_allclose(out[:, 1].std(), 1.0, rtol=1e-5)


def test_ordinary_columns_are_scaled_as_before() -> None:
    """The scaling of columns whose moments are finite is unchanged, bit for bit."""
    X = np.random.default_rng(1).normal(size=(40, 3)) * [1.0, 1e5, 1e-5] + [0.0, 3e8, 1.0]
    pre = TablePreprocessor(numeric="standard")
    out = pre.fit_transform(X)
    assert (pre.prescale_ == 1.0).all()
    assert np.array_equal(out, ((X - X.mean(axis=0)) / X.std(axis=0)).astype(np.float32))


def test_large_offsets_survive_the_float32_cast() -> None:
    X = 1.6e9 + np.array([[0.0], [1.0], [2.0], [3.0]])  # float32 would round these together
    out = TablePreprocessor().fit_transform(X)
    assert len(np.unique(out)) == 4


def test_onehot_gives_each_category_a_feature_and_unseen_ones_all_zeros() -> None:
    pre = TablePreprocessor(numeric="standard").fit(mixed_frame())  # categorical="onehot"
    # text has a, b, c (+ missing): one-hot; cat and flag have two values: one 0/1 feature
    names = feature_labels(pre.columns_)
    assert names == ["num", "text=a", "text=b", "text=c", "cat", "flag", "const"]
    encoded = raw_features(pre, mixed_frame())
    assert encoded.shape == (6, 6)
    close(encoded[:, 1:4], [[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])
    new = mixed_frame().iloc[:2].copy()
    new["text"] = ["zzz", "c"]
    close(raw_features(pre, new)[:, 1:4], [[0, 0, 0], [0, 0, 1]])


def test_onehot_falls_back_to_frequency_for_many_categories() -> None:
    from puicl_model.estimator.preprocessing import MAX_ONEHOT_LEVELS

    levels = MAX_ONEHOT_LEVELS + 1
    values = [f"v{i % levels}" for i in range(3 * levels)] + ["v0"] * 4  # unequal shares
    # (a numeric column beside it; not 0, 1, 2, ..., which would be dropped as an identifier)
    frame = pd.DataFrame({"many": values, "x": np.arange(len(values), dtype=float) % 7})
    pre = TablePreprocessor().fit(frame)
    assert pre.transform(frame).shape == (len(values), 2)
    assert not pre.columns_[0].onehot and pre.columns_[0].codes


def test_category_dtype_of_numbers_is_categorical() -> None:
    frame = pd.DataFrame({"code": pd.Series([1.0, 2.0, 3.0, 1.0]).astype("category"),
                          "x": [0.5, 0.1, 0.3, 0.2]})
    pre = TablePreprocessor(numeric="standard").fit(frame)
    assert [c.kind for c in pre.columns_] == ["categorical", "numeric"]
    assert pre.transform(frame).shape == (4, 4)  # three one-hot features + x


def test_quantile_maps_midranks_to_normal_scores_and_keeps_order() -> None:
    from scipy.stats import norm

    values = np.array([3.0, 1.0, 1.0, 10.0, 1000.0])
    pre = TablePreprocessor().fit(values[:, None])  # numeric="quantile"
    midranks = np.array([3.0, 1.5, 1.5, 4.0, 5.0])
    fitted = pre.transform(values[:, None])[:, 0].astype(np.float64) * pre.scale_ + pre.center_
    close(fitted, norm.ppf((midranks - 0.5) / 5))
    # new rows: placed among the fitted values, clipped at the extreme mid-ranks
    new = np.array([[-5.0], [2.0], [3.0], [5000.0]])
    scored = pre.transform(new)[:, 0].astype(np.float64) * pre.scale_ + pre.center_
    close(scored, norm.ppf([0.5 / 5, 4 / 10, 5 / 10, 1 - 0.5 / 5]))
    assert np.all(np.diff(scored) > 0)
