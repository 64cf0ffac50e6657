"""Labels from a boolean rule (prior.label_rule, prior_gen.rule_label): the label is the rule,
the rule holds on as many rows as π asks for, and its draws are the task's own."""

from __future__ import annotations

import numpy as np
from prior_gen_testlib import data_digest, tiny_config

from prior_gen.factors import plan_step
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.mechanisms_config import LabelRuleConfig
from prior_gen.rule_label import draw_rule, evaluate_rule


def _config(probability: float = 0.5, **rule):
    return tiny_config(prior={"label_rule": {"probability": probability, **rule}})


def _tasks(config, stages=(1, 2, 3, "tail"), steps=(0, 1, 2)):
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def test_a_rule_label_equals_the_recorded_rule_on_the_stored_features() -> None:
    tasks = _tasks(_config(1.0, features=[1, 3], levels=[2, 5]))
    kinds = set()
    for task in tasks:
        rule = task.meta["label_rule"]
        assert task.meta["label_mechanism"] == "rule"
        assert np.array_equal(evaluate_rule(rule, task.x), task.y)
        assert 1 <= len(rule["columns"]) <= 3
        assert all(len(cuts) <= 4 for cuts in rule["thresholds"])
        kinds.update(literal[0] for literal in rule["literals"])
        kinds.update(rule["ops"])
        kinds.add(None if rule["closing"] is None else rule["closing"][0])
    assert {"eq", "ne", "same", "and", "or"} <= kinds


def test_the_rule_keeps_the_pu_sizes_and_pi() -> None:
    for task in _tasks(_config(1.0)):
        meta = task.meta
        assert (task.y[: task.n_labeled] == 1).all()
        assert task.n_labeled == meta["n_labeled"] and task.n_unlabeled == meta["n_unlabeled"]
        # the closing threshold makes the rule hold on q rows (a few more only at ties)
        assert meta["realized_pi"] <= meta["pi"] + 1.0 / meta["n_unlabeled"] + 1e-9
        assert meta["realized_pi"] > meta["pi"] - 0.1


def test_the_rule_holds_on_exactly_the_target_rows_without_ties() -> None:
    data = np.random.default_rng(0)
    rng = np.random.default_rng(1)
    spec = LabelRuleConfig(features=(2, 3), levels=(2, 4))
    for target in (1, 40, 100, 199):
        x = data.standard_normal((200, 5)).astype(np.float32)
        rule = draw_rule(x, target, spec, rng)
        assert int(evaluate_rule(rule, x).sum()) == target


def test_probability_picks_the_share_of_rule_tasks() -> None:
    tasks = _tasks(_config(0.3))
    rules = sum(t.meta["label_mechanism"] == "rule" for t in tasks)
    assert {t.meta["label_mechanism"] for t in tasks} == {"rule", "score"}
    assert 0.15 < rules / len(tasks) < 0.45
    assert all(t.meta["label_mechanism"] == "score" for t in _tasks(_config(0.0), stages=(1,)))


def test_rule_draws_are_the_tasks_own() -> None:
    """Score tasks of a rule config are the tasks without it; the rule stream touches neither
    the features nor the PU split's stream."""
    config = _config(0.5)
    plain = tiny_config()
    for task, before in zip(_tasks(config), _tasks(plain), strict=True):
        if task.meta["label_mechanism"] == "score":
            assert np.array_equal(task.x, before.x) and np.array_equal(task.y, before.y)
        assert task.meta["n_rows"] == before.meta["n_rows"]
    whole = generate_step(config, "train", 2, 1)
    for i in (0, 3, 7):
        alone = generate_tasks([plan_step(config, "train", 2, 1)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])
