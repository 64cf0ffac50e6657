"""PU bagging (pulearn + HistGradientBoosting): registered, ranks well, seeded, fails clearly
without its library, and scores every unlabeled row out of bag."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from benchmark.cli import build_parser, main
from benchmark.methods import METHOD_NAMES, MissingLibraryError, make_method
from benchmark.metrics import auc_mann_whitney
from puicl_common.configio import ConfigError

# fewer bags than the default keep this file fast; the code path is the same
FEW = {"n_bags": 6}


def test_registered_and_listed_in_help():
    assert "pu-bagging" in METHOD_NAMES
    assert "pu-bagging" in build_parser().format_help()


def test_pool_auc_well_above_chance(easy_task):
    X, s, y_u = easy_task
    out = make_method("pu-bagging", overrides=FEW).fit_predict(X, s, seed=5)
    assert out.scores.shape == y_u.shape and out.labels.shape == y_u.shape
    assert np.isfinite(out.scores).all() and ((out.scores >= 0) & (out.scores <= 1)).all()
    # Bayes AUC of the task ≈ 0.96; trees on 4 smooth features reach ≈ 0.9
    assert auc_mann_whitney(y_u, out.scores) > 0.8
    np.testing.assert_array_equal(out.labels, (out.scores >= 0.5).astype(np.int8))
    assert out.pi_hat is None


def test_same_seed_same_scores_other_seed_other_bags(easy_task):
    X, s, _ = easy_task
    a = make_method("pu-bagging", overrides=FEW).fit_predict(X, s, seed=3)
    b = make_method("pu-bagging", overrides=FEW).fit_predict(X, s, seed=3)
    c = make_method("pu-bagging", overrides=FEW).fit_predict(X, s, seed=4)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.scores, c.scores)


def test_unlabeled_rows_are_scored_out_of_bag():
    # Pool rows 0-59 are exact copies of the 60 labeled positives. With one-row leaves the
    # trees memorize: a bag that holds a copy (as class 0, next to its positive twin) scores
    # it ≤ 0.5, a bag that does not scores it near 1. The copies' out-of-bag scores are
    # ≥ 0.90; averaged over every bag, in-bag ones included, their minimum is 0.65.
    rng = np.random.default_rng(0)
    positives = rng.normal(size=(60, 3))
    negatives = rng.normal(size=(60, 3)) + 3.0
    X = np.vstack([positives, positives, negatives])
    s = np.array([1] * 60 + [0] * 120, dtype=np.int8)
    settings = {"n_bags": 12, "min_samples_leaf": 1, "max_iter": 20, "learning_rate": 0.5}
    out = make_method("pu-bagging", overrides=settings).fit_predict(X, s, seed=0)
    assert out.scores[:60].min() > 0.8
    assert auc_mann_whitney(np.r_[np.ones(60), np.zeros(60)], out.scores) > 0.95


def test_bags_are_fitted_on_their_own_rows():
    # pulearn fits on every row with bootstrap counts as weights when the estimator takes
    # sample_weight (9-12x slower with HistGradientBoosting); the shim makes it fit the bag's rows
    from sklearn.utils.validation import has_fit_parameter

    from benchmark.methods.pu_bagging import PUBaggingConfig, _bag_rows_only_estimator

    assert not has_fit_parameter(_bag_rows_only_estimator(PUBaggingConfig()), "sample_weight")
    weighted = PUBaggingConfig(weighted_bags=True)
    assert has_fit_parameter(_bag_rows_only_estimator(weighted), "sample_weight")


def test_nan_features_are_imputed(easy_task):
    X, s, y_u = easy_task
    X = X.copy()
    X[::7, 1] = np.nan
    out = make_method("pu-bagging", overrides=FEW).fit_predict(X, s, seed=0)
    assert np.isfinite(out.scores).all()
    assert auc_mann_whitney(y_u, out.scores) > 0.8


def test_settings_are_validated_by_name(easy_task):
    with pytest.raises(ConfigError, match=r"pu-bagging\.n_bags"):
        make_method("pu-bagging", overrides={"n_bags": 0})
    X, s, _ = easy_task
    with pytest.raises(ValueError, match="bag_size"):
        make_method("pu-bagging", overrides={"bag_size": 10_000}).fit_predict(X, s, seed=0)
    # with 2 bags some pool rows are in both and have no out-of-bag score: said, not filled in
    with pytest.raises(ValueError, match="no out-of-bag score; raise n_bags"):
        make_method("pu-bagging", overrides={"n_bags": 2}).fit_predict(X, s, seed=0)


def test_missing_library_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pulearn", None)  # `import pulearn` now raises
    with pytest.raises(MissingLibraryError, match=r"pip install 'puicl\[bench\]'"):
        make_method("pu-bagging")
    code = main(["--methods", "pu-bagging", "--datasets", "haberman", "--repeats", "1",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "pulearn" in err and "Traceback" not in err
