"""The PUICL adapter, run with a randomly initialised model saved as a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("puicl_model.estimator.classifier")

from benchmark.methods import make_method
from benchmark.runner import evaluate_replicate


@pytest.fixture(scope="module")
def random_weights(tmp_path_factory):
    import torch

    from puicl_model import ModelConfig, PUICLModel
    from puicl_model.net.weights import save_weights

    torch.manual_seed(0)
    model = PUICLModel(ModelConfig(embed_dim=16, num_layers=1, num_heads=2, ff_dim=32))
    return save_weights(model, tmp_path_factory.mktemp("w") / "random.safetensors")


def test_adapter_returns_pool_predictions_and_prior(random_weights, easy_task):
    X, s, y_u = easy_task
    method = make_method("puicl", weights=random_weights)
    out = method.fit_predict(X, s, seed=4)
    assert out.scores.shape == y_u.shape == out.labels.shape
    assert ((out.scores >= 0) & (out.scores <= 1)).all()
    np.testing.assert_array_equal(out.labels, (out.scores > 0.5).astype(np.int8))
    # π̂ of the classifier: the larger of the mean P(y = 0) over the pool and Best Bin
    # Estimation on the chosen blend's cross-fitted scores
    assert out.pi_hat >= float(np.mean(1 - out.scores)) - 1e-9 and out.pi_hat <= 1.0
    again = make_method("puicl", weights=random_weights).fit_predict(X, s, seed=4)
    np.testing.assert_array_equal(out.scores, again.scores)


def test_runner_records_prior_error_for_puicl(random_weights):
    from benchmark.datasets import Dataset
    from benchmark.protocol import make_task

    rng = np.random.default_rng(1)
    y = np.array([1] * 90 + [0] * 40, dtype=np.int8)
    data = Dataset(slug="toy", name="toy", X=rng.normal(size=(130, 3)) + y[:, None], y=y,
                   feature_names=("a", "b", "c"), categorical=(False,) * 3, positive_label="1")
    task = make_task(data, 0, 0)
    record = evaluate_replicate(task, "puicl", seed=3, weights=random_weights)
    assert record["pi_true"] == pytest.approx(40 / 100)
    assert record["pi_abs_error"] == pytest.approx(abs(record["pi_hat"] - 40 / 100))


def test_puicl_settings_are_validated_and_follow_the_weights_content(random_weights, tmp_path):
    from benchmark.methods import make_method, method_settings
    from puicl_common.configio import ConfigError

    with pytest.raises(ConfigError, match=r"puicl\.chunk_size"):
        make_method("puicl", weights=random_weights, overrides={"chunk_size": 1})
    with pytest.raises(ConfigError, match=r"puicl\.chunksize"):
        make_method("puicl", weights=random_weights, overrides={"chunksize": 100})
    method = make_method("puicl", weights=random_weights, overrides={"single_pass_limit": 300})
    assert method.config.single_pass_limit == 300
    before = method_settings(method)
    # the same path with other content must not reuse cached replicates
    import shutil

    copy = tmp_path / "weights"
    shutil.copytree(random_weights.parent, copy)
    target = copy / random_weights.name
    same = method_settings(make_method("puicl", weights=target,
                                       overrides={"single_pass_limit": 300}))
    assert same == before
    target.write_bytes(target.read_bytes()[:-1] + b"\x01")
    changed = method_settings(make_method("puicl", weights=target,
                                          overrides={"single_pass_limit": 300}))
    assert changed["weights_sha256"] != before["weights_sha256"]


def test_categorical_flags_reach_the_classifier_as_categories(random_weights):
    import pandas as pd

    from benchmark.methods.puicl import as_table

    X = np.array([[1.0, 0.5], [2.0, 0.1], [3.0, 0.7], [1.0, 0.2]])
    assert as_table(X, None) is X and as_table(X, (False, False)) is X
    frame = as_table(X, (True, False))
    assert isinstance(frame["x0"].dtype, pd.CategoricalDtype)
    assert frame["x1"].dtype == np.float64
    with pytest.raises(ValueError, match="categorical has 1 flags for 2 columns"):
        as_table(X, (True,))
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 4, 60), rng.normal(size=60)]).astype(float)
    s = (np.arange(60) < 20).astype(int)
    method = make_method("puicl", weights=random_weights)
    plain = method.fit_predict(X, s, seed=1)
    coded = method.fit_predict(X, s, seed=1, categorical=(True, False))
    assert not np.allclose(plain.scores, coded.scores)  # one-hot features, not the codes


def test_settings_enter_the_cache_key_only_away_from_their_legacy_value(random_weights):
    from benchmark.methods import method_settings

    default = method_settings(make_method("puicl", weights=random_weights))
    # the keys cached replicates were stored under before later settings existed, and the
    # partner, the pool's sample and the large pools' contexts, whose defaults ("auto", 20,000,
    # "shared") are not the values those replicates were computed with ("none", the whole
    # pool, "chunks")
    assert sorted(default) == ["_version", "chunk_size", "large_pool", "max_labeled",
                               "n_estimators", "partner", "pool_sample", "single_pass_limit",
                               "threshold", "weights_sha256"]
    assert default["partner"] == "auto" and default["pool_sample"] == 20_000
    assert default["large_pool"] == "shared"
    before = method_settings(make_method("puicl", weights=random_weights, overrides={
        "partner": "none", "pool_sample": None, "large_pool": "chunks"}))
    assert sorted(before) == sorted(set(default) - {"partner", "pool_sample", "large_pool"})


def test_removed_column_options_load_at_their_old_default_and_are_refused_otherwise(
        random_weights):
    from benchmark.methods import method_settings
    from puicl_common.configio import ConfigError

    default = method_settings(make_method("puicl", weights=random_weights))
    # a --method-config written while the options existed, at their defaults: same replicates
    old = {"affine_copies": "keep", "few_valued_integers": "numeric",
           "categorical_max_levels": 10}
    assert method_settings(make_method("puicl", weights=random_weights,
                                       overrides=old)) == default
    for key, value in {"affine_copies": "drop", "few_valued_integers": "categorical",
                       "categorical_max_levels": 4}.items():
        with pytest.raises(ConfigError, match=rf"^puicl\.{key}: removed: the column option "
                                              r"did not beat the default"):
            make_method("puicl", weights=random_weights, overrides={key: value})


def test_the_portfolio_setting_is_read_and_identified_under_its_former_name(random_weights):
    """``portfolio`` was stored as ``partner``: a --method-config naming ``partner`` is read
    as ``portfolio``, results are identified under ``partner`` (cached replicates keep their
    keys), and naming both is refused by name."""
    from benchmark.methods import method_settings
    from puicl_common.configio import ConfigError

    former = make_method("puicl", weights=random_weights, overrides={"partner": "none"})
    current = make_method("puicl", weights=random_weights, overrides={"portfolio": "none"})
    assert former.config.portfolio == current.config.portfolio == "none"
    assert method_settings(former) == method_settings(current)
    assert "partner" in method_settings(make_method("puicl", weights=random_weights))
    with pytest.raises(ConfigError, match=r"partner.*former name of 'portfolio'"):
        make_method("puicl", weights=random_weights,
                    overrides={"partner": "none", "portfolio": "none"})
