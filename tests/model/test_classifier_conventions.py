"""PUICLClassifier follows scikit-learn's conventions: feature-name warnings, one source of
inference defaults shared with the CLI and the benchmark adapter."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import numpy as np
import pandas as pd
import pytest

from benchmark.methods.puicl import PUICLConfig
from puicl_common.configio import ConfigError, from_mapping
from puicl_model import PUICLClassifier
from puicl_model.files.cli import _parser
from puicl_model.passes.settings import InferenceSettings


@pytest.fixture
def frame_and_s(rng) -> tuple[pd.DataFrame, np.ndarray]:
    X = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    s = np.zeros(40, dtype=int)
    s[:12] = 1
    return X, s


def test_a_numpy_array_after_a_fit_on_a_dataframe_warns(small_weights, frame_and_s) -> None:
    X, s = frame_and_s
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    with pytest.warns(UserWarning, match="X does not have valid feature names, but "
                                         "PUICLClassifier was fitted with feature names"):
        clf.predict_proba(X.to_numpy()[:, ::-1])


def test_a_dataframe_after_a_fit_on_a_numpy_array_warns(small_weights, frame_and_s) -> None:
    X, s = frame_and_s
    clf = PUICLClassifier(weights=small_weights).fit(X.to_numpy(), s)
    assert not hasattr(clf, "feature_names_in_")
    with pytest.warns(UserWarning, match="X has feature names, but PUICLClassifier was "
                                         "fitted without feature names"):
        clf.predict(X)


def test_the_same_kind_of_table_gives_no_warning(small_weights, frame_and_s) -> None:
    X, s = frame_and_s
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    from puicl_model.estimator.prior_report import ThresholdWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (what the cut labels is the data's word, not the table's kind: the random test
        # model's probabilities crowd the cut, and predict says so)
        warnings.simplefilter("ignore", ThresholdWarning)
        reordered = clf.predict_proba(X[["c", "a", "b"]])  # matched by name
        PUICLClassifier(weights=small_weights).fit(X.to_numpy(), s).predict(X.to_numpy())
    np.testing.assert_array_equal(reordered, clf.predict_proba(X))
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c"])


def test_mixed_column_name_types_are_still_accepted(small_weights, frame_and_s) -> None:
    X, s = frame_and_s
    X = X.set_axis(["a", 1, 2], axis=1)
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    assert not hasattr(clf, "feature_names_in_")  # scikit-learn's rule: string names only
    np.testing.assert_array_equal(clf.predict_proba(X[[2, "a", 1]]), clf.predict_proba(X))


def test_another_number_of_columns_gives_sklearns_error(small_weights, frame_and_s) -> None:
    X, s = frame_and_s
    clf = PUICLClassifier(weights=small_weights).fit(X.to_numpy(), s)
    with pytest.raises(ValueError, match="X has 2 features, but PUICLClassifier is expecting "
                                         "3 features as input"):
        clf.predict(X.to_numpy()[:, :2])


def test_inference_defaults_are_written_once() -> None:
    signature = inspect.signature(PUICLClassifier).parameters
    cli = _parser().parse_args(["predict"])
    settings = InferenceSettings()
    # every setting is a parameter of the classifier and an option of puicl predict
    names = [field.name for field in dataclasses.fields(InferenceSettings)]
    assert {"n_estimators", "max_labeled", "portfolio"} <= set(names)
    for name in names:
        assert signature[name].default == getattr(settings, name)
        assert getattr(cli, name) == getattr(settings, name)
    # the benchmark adapter's settings: the classifier's, plus its threshold
    assert issubclass(PUICLConfig, InferenceSettings)
    assert PUICLConfig().threshold == signature["threshold"].default


# a value other than the default for every inference setting
OTHER_SETTINGS = {"n_estimators": 3, "single_pass_limit": 500, "chunk_size": 200,
                  "max_labeled": 50, "portfolio": "none", "pool_sample": 5000,
                  "large_pool": "chunks"}


def test_every_setting_reaches_the_classifier(small_weights) -> None:
    from benchmark.methods.puicl import PUICL
    from puicl_model.estimator.input_checks import check_settings
    from puicl_model.files.cli import _classifier

    # a new setting must be added here, and then reaches the classifier by every path below
    assert set(OTHER_SETTINGS) == set(InferenceSettings.names())
    expected = InferenceSettings(**OTHER_SETTINGS)
    assert all(getattr(expected, name) != getattr(InferenceSettings(), name)
               for name in OTHER_SETTINGS)
    # the classifier's parameters, read back at fit
    clf = PUICLClassifier(weights=small_weights, **OTHER_SETTINGS)
    assert check_settings(clf) == expected
    # the benchmark adapter's settings, the threshold with them
    config = PUICLConfig(**OTHER_SETTINGS, threshold="prior")
    params = PUICL(weights=small_weights, config=config).classifier(seed=4).get_params()
    assert InferenceSettings.read_from(clf.set_params(**params)) == expected
    assert (params["threshold"], params["random_state"]) == ("prior", 4)
    # puicl predict's options, one per setting
    options = [word for name, value in OTHER_SETTINGS.items()
               for word in (f"--{name.replace('_', '-')}", str(value))]
    args = _parser().parse_args(["predict", *options])
    assert InferenceSettings.read_from(_classifier(args)) == expected
    # --pool-sample 0: the whole pool
    args = _parser().parse_args(["predict", "--pool-sample", "0"])
    assert _classifier(args).pool_sample is None


def test_benchmark_threshold_prior_labels_the_estimated_share_negative(small_weights) -> None:
    from benchmark.methods.puicl import PUICL

    config = from_mapping(PUICLConfig, {"threshold": "prior"}, path="puicl")
    rng = np.random.default_rng(1)
    X, s = rng.normal(size=(60, 4)), np.r_[np.ones(20), np.zeros(40)]
    output = PUICL(weights=small_weights, config=config).fit_predict(X, s, seed=0)
    assert int(np.sum(output.labels == 0)) == round(output.pi_hat * 40)


@pytest.mark.parametrize("value", [0.0, 1.0, "median", True])
def test_benchmark_threshold_is_validated(value) -> None:
    with pytest.raises(ConfigError, match=r"puicl\.threshold: (must be a number in|expected)"):
        from_mapping(PUICLConfig, {"threshold": value}, path="puicl")


@pytest.mark.parametrize(("key", "value", "minimum"),
                         [("chunk_size", 3, 4), ("max_labeled", 1, 2),
                          ("single_pass_limit", 0, 1), ("n_estimators", 0, 1)])
def test_one_validation_for_classifier_and_benchmark(small_weights, key, value,
                                                     minimum) -> None:
    message = f"must be an integer >= {minimum}, got {value}"
    with pytest.raises(ConfigError, match=f"puicl.{key}: {message}"):
        from_mapping(PUICLConfig, {key: value}, path="puicl")
    X, s = np.random.default_rng(0).normal(size=(10, 3)), np.r_[np.ones(3), np.zeros(7)]
    with pytest.raises(ValueError, match=f"{key}: {message}"):
        PUICLClassifier(weights=small_weights, **{key: value}).fit(X, s)


def test_random_state_takes_a_numpy_random_state_or_generator(small_weights, frame_and_s) -> None:
    # as in scikit-learn: an instance is accepted, seeds the fit, and is advanced by it, so
    # that two fits from one RandomState make two different (reproducible) ensembles
    X, s = frame_and_s
    settings = {"weights": small_weights, "n_estimators": 4}  # members 3 and 4 draw subsets

    def probabilities(state) -> np.ndarray:
        return PUICLClassifier(random_state=state, **settings).fit(X, s).predict_proba(X)[:, 1]

    for make in (np.random.RandomState, np.random.default_rng):
        shared = make(7)
        first, second = probabilities(shared), probabilities(shared)
        assert np.array_equal(first, probabilities(make(7)))
        assert not np.array_equal(first, second)
    with pytest.raises(ValueError, match="RandomState or Generator, or None, got 'seven'"):
        PUICLClassifier(random_state="seven", weights=small_weights).fit(X, s)


def test_a_failed_refit_leaves_no_fitted_classifier_and_keeps_the_users_attributes(
        small_weights) -> None:
    """A fit that fails at any step, here the settings, leaves no fitted attribute, of this
    fit or an earlier one: no prediction silently reads the old fit under new settings. An
    attribute a user set is not the fit's to remove."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    rng = np.random.default_rng(2)
    X, s = rng.normal(size=(120, 3)), (np.arange(120) < 30).astype(int)
    clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    clf.user_note_ = "mine"
    with pytest.raises(ValueError, match="keep_columns"):
        clf.set_params(keep_columns=["nope"]).fit(X, s)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    with pytest.raises(NotFittedError):  # a fitted part, asked before fit: one line
        clf.portfolio_  # noqa: B018
    assert not hasattr(clf, "x_pool_") and clf.user_note_ == "mine"
    with pytest.raises(NotFittedError):
        check_is_fitted(clf, "fitted_")
    with pytest.raises(ValueError, match="former name of portfolio"):
        PUICLClassifier(weights=small_weights, partner="bogus").fit(X, s)
    with pytest.raises(ValueError, match=r"sampled_from=n\) needs an integer random_state"):
        PUICLClassifier(weights=small_weights, random_state=None).fit(X, s, sampled_from=90)
