"""The features the preprocessor gives the model, bit for bit as recorded, and the two column
options that were measured and removed (``affine_copies``, ``few_valued_integers`` with
``categorical_max_levels``): the classifier and ``puicl predict`` no longer take them."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.preprocessing import TablePreprocessor
from puicl_model.files.cli import main

ENCODINGS = (("quantile", "onehot"), ("power", "ordinal"), ("standard", "frequency"))


def breast_cancer() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    return load_breast_cancer(as_frame=True).data


def mixed_table() -> pd.DataFrame:
    """Categories, a constant, missing values, and what the removed options acted on: an
    integer column of 3 values, an affine copy, an integer column of up to 50 values."""
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


def test_copies_are_kept_and_integers_read_as_numbers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pre = TablePreprocessor().fit(mixed_table())
    assert "size_cm" in pre.kept_features_ and "level" in pre.kept_features_
    assert {c.name: c.kind for c in pre.columns_}["level"] == "numeric"


REMOVED = ("affine_copies", "few_valued_integers", "categorical_max_levels")


def test_the_removed_options_are_no_parameters_of_the_classifier() -> None:
    assert not set(REMOVED) & set(PUICLClassifier().get_params())
    with pytest.raises(TypeError, match="affine_copies"):
        PUICLClassifier(affine_copies="drop")  # type: ignore[call-arg]


@pytest.mark.parametrize("option", ["--affine-copies", "--few-valued-integers",
                                    "--categorical-max-levels"])
def test_puicl_predict_no_longer_takes_them(option, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["predict", "--input", "table.csv", "--label-column", "s", option, "3"])
    assert stopped.value.code == 2
    assert f"unrecognized arguments: {option} 3" in capsys.readouterr().err


def test_normal_scores_are_the_mid_ranks_among_the_fitted_values() -> None:
    """Each value's mid-rank share among the fitted values, counted one value at a time (the
    encoding searches the values in sorted order, then puts them back)."""
    from scipy.special import ndtri

    from puicl_model.estimator.column_encoding import _normal_scores

    rng = np.random.default_rng(4)
    fitted = np.sort(rng.integers(0, 20, 300).astype(float))  # ties
    values = np.concatenate([rng.integers(-3, 24, 500).astype(float), [np.nan, 7.5, np.inf]])
    rng.shuffle(values)
    n = len(fitted)
    below = (fitted[None, :] < values[:, None]).sum(1)
    at_or_below = (fitted[None, :] <= values[:, None]).sum(1)
    at_or_below[np.isnan(values)] = below[np.isnan(values)] = n  # NaN sorts after everything
    share = np.clip((below + at_or_below) / (2.0 * n), 0.5 / n, 1.0 - 0.5 / n)
    np.testing.assert_array_equal(_normal_scores(values, fitted), ndtri(share))
