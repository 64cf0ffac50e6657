"""A mechanism is one entry in prior_gen.mechanisms.MECHANISMS: generate_tasks calls its hooks
and nothing else needs to know it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from prior_gen_testlib import data_digest, tiny_config

import prior_gen.generate as generate_module
from prior_gen.generate import generate_tasks
from prior_gen.mechanisms import MECHANISMS, Mechanism
from prior_gen.paper.factors import TaskPlan, plan_step
from prior_gen.task import Task


def stand_in(plan: TaskPlan, spec: str) -> Task | None:
    """Even tasks are replaced by a small task of their own, odd ones keep their SCM."""
    if plan.index % 2:
        return None
    return Task(x=np.zeros((3, 1), np.float32), y=np.ones(3, np.int8), n_labeled=1,
                meta={"index": plan.index, "stand_in": spec})


def marked(task: Task, spec: str) -> Task:
    return dataclasses.replace(task, meta={**task.meta, "marked": spec})


def test_a_registered_mechanism_has_its_hooks_called(monkeypatch: pytest.MonkeyPatch) -> None:
    config = tiny_config()
    plain = generate_tasks(plan_step(config, "train", 2, 1), config)
    extra = Mechanism("marker", lambda prior: "on", instead_of_scm=stand_in, after_scm=marked)
    monkeypatch.setattr(generate_module, "MECHANISMS", (*MECHANISMS, extra))
    tasks = generate_tasks(plan_step(config, "train", 2, 1), config)
    for task, alone in zip(tasks, plain, strict=True):
        if alone.meta["index"] % 2 == 0:  # a task in place of the SCM is final
            assert task.meta == {"index": alone.meta["index"], "stand_in": "on"}
        else:  # the synthetic task is the same, then changed by the hook
            assert task.meta.pop("marked") == "on"
            assert data_digest([task]) == data_digest([alone])


def test_a_mechanism_whose_section_is_absent_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    config = tiny_config()
    plain = generate_tasks(plan_step(config, "train", 2, 1), config)
    off = Mechanism("off", lambda prior: None, instead_of_scm=stand_in, after_scm=marked)
    monkeypatch.setattr(generate_module, "MECHANISMS", (*MECHANISMS, off))
    assert data_digest(generate_tasks(plan_step(config, "train", 2, 1), config)) == (
        data_digest(plain))
