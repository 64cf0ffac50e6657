"""The portfolio rule's replay (studies/portfolio_rule.py): every rule judged on the same kept
scores, against the pool's hidden labels."""

from __future__ import annotations

import numpy as np
import pytest

from puicl_model.estimator.portfolio import MEMBERS
from studies.portfolio_rule import cell_name, evaluate_task


def _kept_scores(path, rng, signal: dict[str, float], n_held=300, n_pool=900) -> None:
    y = (np.arange(n_pool) >= n_pool // 2).astype(np.int8)  # the second half positive
    arrays = {"y_pool": y, "n_labeled": np.array(700), "pi": np.array(0.5),
              "seconds": np.array(1.0), "folds": np.array(1)}
    for member in MEMBERS:
        arrays[f"held0_{member}"] = rng.normal(size=n_held) + signal[member]
        pool = rng.normal(size=n_pool) + signal[member] * y
        arrays[f"pool0_{member}"] = pool
        arrays[f"final_{member}"] = pool
    arrays["default_pool"] = 1.0 / (1.0 + np.exp(-arrays["final_model"]))
    np.savez(path, **arrays)


def test_the_replay_reads_each_rules_pick_off_the_true_auc(tmp_path) -> None:
    path = tmp_path / cell_name(600, 0.5, None) / "table.npz"
    path.parent.mkdir()
    _kept_scores(path, np.random.default_rng(0), {"model": 0.2, "logistic": 0.2, "bagged": 2.0})
    rows = evaluate_task(path)
    assert {row["cell"] for row in rows} == {"600_pi0.5"}
    for row in rows:
        assert row["auc"] == pytest.approx(row[f"true_{row['picked']}"])
        assert row["oracle"] >= row["auc"] - 1e-12
    # the evidence is strong: from any fallback a blend weighing the bagged member wins
    picks = {row["picked"] for row in rows if row["z"] == 3.0}
    assert picks and all("bagged" in pick for pick in picks)
    assert all(row["picked"] == row["fallback"] for row in rows if row["z"] == np.inf)


def test_the_first_bags_variant_with_every_bag_is_the_fitted_member() -> None:
    from puicl_model.estimator.learners import BAGGED, CrossFittedLearner
    from studies.portfolio_rule import first_bags

    rng = np.random.default_rng(3)
    x_labeled, x_pool = rng.normal(size=(60, 4)) + 0.5, rng.normal(size=(150, 4))
    learner = CrossFittedLearner(BAGGED, entropy=11, n_threads=1)
    labeled, pool = learner.fit(x_labeled, x_pool, bags=10)  # a collect fits more bags
    again_labeled, again_pool = first_bags(learner, 10, x_labeled, x_pool)
    np.testing.assert_allclose(again_labeled, labeled, rtol=0, atol=1e-12)
    np.testing.assert_allclose(again_pool, pool, rtol=0, atol=1e-12)
    fewer_labeled, fewer_pool = first_bags(learner, 5, x_labeled, x_pool)
    assert np.isfinite(fewer_labeled).all() and np.isfinite(fewer_pool).all()
    assert not np.allclose(fewer_pool, pool)
