"""The candidate rules' replay (studies/rule_candidates.py): each rule's pick judged on the
same kept scores, against the pool's hidden labels and the per-task best baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from studies.portfolio_rule import cell_name
from studies.rule_candidates import _count_se, replay_task, summary


def _kept(path, rng, signal: dict[str, float], n_labeled: int) -> np.ndarray:
    """A kept small-table task: two folds of held-out positives, a half-negative pool."""
    n_held, n_pool = n_labeled // 2, 600
    y = (np.arange(n_pool) >= n_pool // 2).astype(np.int8)
    arrays = {"y_pool": y, "n_labeled": np.array(n_labeled), "pi": np.array(0.5),
              "seconds": np.array(1.0), "folds": np.array(2), "repetition": np.array(0)}
    for member, strength in signal.items():
        final = rng.normal(size=n_pool) + strength * y
        for k in range(2):
            arrays[f"held{k}_{member}"] = rng.normal(size=n_held) + strength
            arrays[f"pool{k}_{member}"] = final
        arrays[f"final_{member}"] = final
    arrays["default_pool"] = 1.0 / (1.0 + np.exp(-arrays["final_model"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return y


def test_each_rule_is_judged_by_the_true_auc_of_its_pick(tmp_path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / cell_name(600, 0.5, None) / "table@3.npz"
    y = _kept(path, rng, {"model": 0.3, "logistic": 0.3, "bagged": 0.3, "bagged10": 0.3}, 40)
    rows = pd.DataFrame(replay_task(path))
    assert set(rows["trees"]) == {"bagged", "bagged10"}
    assert set(rows["repetition"]) == {3} and set(rows["dataset"]) == {"table"}
    alone = rows[rows["rule"] == "model alone"]["auc"]
    with np.load(path) as kept:
        assert np.allclose(alone, roc_auc_score(y, kept["final_model"]))
    # thin evidence: the previous rule stands on thirds, the chosen one on the model at 0.6
    picked = rows.set_index(["trees", "rule"])["weights"]
    assert picked[("bagged", "previous")] == "model:0.33 logistic:0.33 bagged:0.33"
    assert picked[("bagged10", "fallback model 0.60")] == "model:0.60 logistic:0.20 bagged10:0.20"


def test_the_summary_reads_the_model_alone_and_the_baseline_per_task(tmp_path) -> None:
    rng = np.random.default_rng(1)
    frames = []
    for name, model in (("strong", 3.0), ("weak", 0.2)):
        path = tmp_path / cell_name(600, 0.5, None) / f"{name}.npz"
        _kept(path, rng, {"model": model, "logistic": 0.2, "bagged": 0.2}, 200)
        frames.append(pd.DataFrame(replay_task(path)).assign(baseline=0.6))
    table = summary(pd.concat(frames)).set_index("rule")
    # the model leads the baseline (0.6) by far on one table only
    assert (table["strong_tables"] == 1).all()
    assert table.loc["model alone", "-alone"] == 0.0
    assert table.loc["previous", "-previous"] == 0.0
    assert table.loc["model alone", "behind"] == pytest.approx(0.5)


def test_the_fixed_blends_ignore_the_evidence_and_the_others_follow_it(tmp_path) -> None:
    rng = np.random.default_rng(2)
    weak = tmp_path / cell_name(600, 0.5, None) / "weak.npz"
    _kept(weak, rng, {"model": 0.3, "logistic": 0.3, "bagged": 0.3}, 40)
    strong = tmp_path / cell_name(600, 0.5, None) / "trees.npz"
    _kept(strong, rng, {"model": 0.1, "logistic": 0.1, "bagged": 3.0}, 400)
    for path, trees_win in ((weak, False), (strong, True)):
        picked = pd.DataFrame(replay_task(path)).set_index("rule")["weights"]
        assert picked["fixed model 0.60 logistic 0.40"] == "model:0.60 logistic:0.40"
        shares = {rule: dict((m, float(w)) for m, w in
                             (item.split(":") for item in picked[rule].split()))
                  for rule in ("evidence weights x0.3", "stacking shrunk at 6 SE")}
        for weights in shares.values():
            # thin evidence leaves the fallback's weight on the trees; clear evidence moves it
            assert (weights.get("bagged", 0.0) > 0.5) == trees_win, (path.name, weights)


def test_the_count_behind_has_no_spread_where_every_table_moves_alike() -> None:
    assert _count_se(pd.Series([1, 1, 1, 1], index=list("abcd"))) == 0.0
    assert _count_se(pd.Series([3, -2, 0, 1], index=list("abcd"))) > 0.5
