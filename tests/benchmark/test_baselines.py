"""Every baseline beats chance clearly on an easy PU task and is deterministic under its seed."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.methods import BASELINES, make_method
from benchmark.metrics import accuracy, auc_mann_whitney
from puicl_common.configio import ConfigError
from puicl_model.estimator.prior import best_bin_alpha

# Shorter training for the neural baselines keeps this file fast (CI budget); the code path is
# the same as with the defaults.
FAST = {
    "vpu": {"epochs": 12},
    "nnpu": {"epochs": 40, "prior_warm_start_epochs": 40},
    "tedn": {"warm_start_epochs": 50, "cvir_epochs": 30},
    "pu-bagging": {"n_bags": 6},
}


# the neural baselines train for epochs: 6-18 s each on 2 cores, so outside `-m "not slow"`
NEURAL = {"empu", "nnpu", "tedn", "vpu"}


def _marked(names) -> list:
    return [pytest.param(n, marks=pytest.mark.slow) if n in NEURAL else n for n in names]


@pytest.mark.parametrize("name", _marked(sorted(BASELINES)))
def test_baseline_beats_chance_and_is_deterministic(name, easy_task):
    X, s, y_u = easy_task
    first = make_method(name, overrides=FAST.get(name)).fit_predict(X, s, seed=11)
    second = make_method(name, overrides=FAST.get(name)).fit_predict(X, s, seed=11)
    assert first.scores.shape == y_u.shape and first.labels.shape == y_u.shape
    assert set(np.unique(first.labels)) <= {0, 1}
    # Bayes AUC of this task is about 0.96, chance 0.5; the small neural nets overfit a bit
    assert auc_mann_whitney(y_u, first.scores) > 0.8, name
    assert accuracy(y_u, first.labels) > 0.7, name
    np.testing.assert_array_equal(first.scores, second.scores)
    np.testing.assert_array_equal(first.labels, second.labels)
    assert first.pi_hat == second.pi_hat
    if first.pi_hat is not None:
        assert 0.0 <= first.pi_hat <= 1.0


@pytest.mark.parametrize("name", _marked(["empu", "ulsif", "elkan-noto"]))
def test_other_seed_changes_randomized_methods(name, easy_task):
    X, s, _ = easy_task
    a = make_method(name).fit_predict(X, s, seed=1).scores
    b = make_method(name).fit_predict(X, s, seed=2).scores
    assert not np.array_equal(a, b)


@pytest.mark.slow
def test_prior_estimates_are_close_on_the_easy_task(easy_task):
    X, s, y_u = easy_task
    true_pi = float(np.mean(y_u == 0))
    for name in ("tedn", "empu"):
        pi_hat = make_method(name, overrides=FAST.get(name)).fit_predict(X, s, seed=3).pi_hat
        assert abs(pi_hat - true_pi) < 0.15, (name, pi_hat)


def test_nan_features_are_imputed(easy_task):
    X, s, y_u = easy_task
    X = X.copy()
    X[::7, 1] = np.nan
    out = make_method("empu").fit_predict(X, s, seed=0)
    assert np.isfinite(out.scores).all()
    assert auc_mann_whitney(y_u, out.scores) > 0.85


def test_bbe_recovers_a_known_mixture_proportion():
    rng = np.random.default_rng(0)
    # scores: positives uniform on [0.5, 1]; U = 30 % positives + 70 % negatives on [0, 0.5)
    p = rng.uniform(0.5, 1.0, 2000)
    u = np.concatenate([rng.uniform(0.5, 1.0, 600), rng.uniform(0.0, 0.5, 1400)])
    assert best_bin_alpha(p, u) == pytest.approx(0.3, abs=0.03)


def test_bad_inputs_and_settings_give_clear_errors(easy_task):
    X, s, _ = easy_task
    with pytest.raises(ValueError, match="X has 300 rows but s has 299"):
        make_method("ulsif").fit_predict(X, s[:-1], seed=0)
    with pytest.raises(ValueError, match="s must be 1"):
        make_method("ulsif").fit_predict(X, np.full(len(X), 2), seed=0)
    with pytest.raises(ConfigError, match=r"tedn\.lr: must be positive"):
        make_method("tedn", overrides={"lr": -1.0})
    with pytest.raises(ConfigError, match=r"vpu\.epoch: unknown key"):
        make_method("vpu", overrides={"epoch": 3})
    with pytest.raises(ValueError, match="unknown method 'svm'"):
        make_method("svm")


def test_puicl_without_weights_says_to_pass_weights(monkeypatch):
    import benchmark.methods.puicl as puicl_method

    monkeypatch.setattr(puicl_method, "default_weights", lambda: None)  # no bundled checkpoint
    with pytest.raises(ValueError, match="--weights"):
        make_method("puicl")
    with pytest.raises(ValueError, match="no such file or directory"):
        make_method("puicl", weights="/nonexistent/weights")


def test_puicl_uses_the_bundled_checkpoint_by_default():
    from puicl_model.net.weights import bundled_weights_path

    assert make_method("puicl").weights == bundled_weights_path()
