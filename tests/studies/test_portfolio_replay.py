"""The portfolio's rules replayed on kept scores (studies/portfolio_replay.py): the oracle's
ceiling, fixed blends spelled on the command line, and differences paired per task."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from studies.portfolio_replay import (
    Kept,
    blend_weights,
    judge,
    paired,
    rule_named,
    shipped,
    true_auc,
)

MEMBERS = ("model", "logistic", "bagged")


def _task(name: str, strengths: dict[str, float], seed: int) -> Kept:
    """A kept task with held-out positives: each member's log-odds shifted by its strength
    on the positives (of the pool and of the held-out labeled rows)."""
    rng = np.random.default_rng(seed)
    y = (np.arange(800) >= 400).astype(np.int8)
    final = {m: rng.normal(size=len(y)) + s * y for m, s in strengths.items()}
    held = {m: rng.normal(size=300) + s for m, s in strengths.items()}
    return Kept(name, "cell", "held", y, 900, 0.5, final, [held], [dict(final)], {})


TASKS = [_task("model-strong", {"model": 1.5, "logistic": 0.2, "bagged": 0.3}, 0),
         _task("trees-strong", {"model": 0.2, "logistic": 0.2, "bagged": 1.5}, 1),
         _task("even", {"model": 0.6, "logistic": 0.6, "bagged": 0.6}, 2)]


def test_the_oracle_is_the_ceiling_of_every_rule_and_a_fixed_blend_scores_its_weights() -> None:
    rules = {name: rule_named(name) for name in
             ("shipped", "oracle", "highest", "clearest-z3-small3", "blend:model=1",
              "blend:model=0.5+bagged=0.5")}
    frame = judge(TASKS, MEMBERS, rules, None)
    wide = frame.pivot(index="task", columns="rule", values="auc")
    for rule in rules:
        assert (wide["oracle"] >= wide[rule] - 1e-12).all(), rule
    # the oracle takes the strong member where one member is strong
    picks = frame.pivot(index="task", columns="rule", values="picked")
    assert "bagged" in picks.loc["trees-strong", "oracle"]
    # a fixed blend of the model alone is the model's own AUC
    for task in TASKS:
        assert wide.loc[task.name, "blend:model=1"] == pytest.approx(
            roc_auc_score(task.y, task.final["model"]))
    assert wide.loc["trees-strong", "blend:model=0.5+bagged=0.5"] == pytest.approx(
        true_auc(TASKS[1], {"model": 0.5, "bagged": 0.5}))


def test_differences_are_paired_per_task_against_the_first_rule() -> None:
    rules = {"shipped": shipped, "blend:model=1": rule_named("blend:model=1")}
    frame = judge(TASKS, MEMBERS, rules, None)
    table = paired(frame, "shipped")
    wide = frame.pivot(index="task", columns="rule", values="auc")
    diff = wide["blend:model=1"] - wide["shipped"]
    assert table.loc["blend:model=1", "difference"] == pytest.approx(diff.mean(), abs=1e-4)
    assert table.loc["blend:model=1", "se"] == pytest.approx(
        diff.std(ddof=1) / np.sqrt(len(diff)), abs=1e-4)
    assert table.loc["shipped", "difference"] == 0 and table.loc["shipped", "picks_changed"] == 0


def test_a_misspelled_blend_or_rule_is_refused_in_one_line() -> None:
    assert blend_weights("model=0.6+bagged=0.4") == {"model": 0.6, "bagged": 0.4}
    with pytest.raises(ValueError, match="member=weight"):
        rule_named("blend:model0.6")
    with pytest.raises(SystemExit, match="no rule 'oracel'"):
        rule_named("oracel")


def test_the_trees_rule_swaps_the_standing_fallbacks_trees_as_the_classifier_does() -> None:
    """Where the model-weighted blend stands, the trees rule puts the fourth member in its tree
    place when that member's out-of-fold scores of the labeled positives lead the forest's by
    the rule's bar (``portfolio_rule.stronger_trees``), and leaves it where they do not."""
    from dataclasses import replace

    members = (*MEMBERS, "hgb30")
    rng = np.random.default_rng(5)
    base = _task("even", {"model": 0.6, "logistic": 0.6, "bagged": 0.6, "hgb30": 0.6}, 2)
    # the forest's and the boosted bags' out-of-fold scores of 900 labeled positives; the
    # pool's positives (y = 1) are shifted by the same strengths as the labeled ones
    pool_y = base.y.astype(bool)
    strong = replace(base, final={**base.final,
                                  "hgb30": rng.normal(size=len(pool_y)) + 1.5 * pool_y},
                     labeled={"bagged": rng.normal(size=900) + 0.6,
                              "hgb30": rng.normal(size=900) + 1.5})
    level = replace(base, labeled={"bagged": rng.normal(size=900) + 0.6,
                                   "hgb30": rng.normal(size=900) + 0.6})
    rule = rule_named("trees2-z3-small3")
    assert rule_named("clearest-z3-small3")(strong, members) == "model-weighted"
    assert rule(strong, members) == "blend:model=0.6+logistic=0.2+hgb30=0.2"
    assert rule(level, members) == "model-weighted"
    frame = judge([strong], members, {"trees": rule}, None)
    assert frame["auc"].iloc[0] == pytest.approx(
        true_auc(strong, {"model": 0.6, "logistic": 0.2, "hgb30": 0.2}))
