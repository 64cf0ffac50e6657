"""Generate the tasks of one step: plan factors, run the SCMs batched, build the PU tasks.

A step is the unit of generation: its tasks are produced together, the tasks sharing a forward
signature in one batched pass (:mod:`prior_gen.engine.forward`). Every draw comes from the
task's own stream, so the bytes of a task depend only on (config, split, stage, index).

An SCM whose output overflows float32 is drawn again as :mod:`prior_gen.paper.reference`
says; metadata records ``attempts`` and the functions actually used.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from prior_gen.config import GenerationConfig
from prior_gen.engine.forward import forward_group
from prior_gen.engine.pu import NonFiniteOutput, build_task
from prior_gen.mechanisms import MECHANISMS
from prior_gen.paper.factors import TaskPlan, plan_step
from prior_gen.paper.reference import (
    MAX_ATTEMPTS,
    REDRAW_ACTIVATIONS_FROM,
    RawTask,
    redraw_activations,
)
from prior_gen.paper.seeding import Stage
from prior_gen.task import Task

__all__ = ["generate_step", "generate_tasks"]


def generate_tasks(plans: list[TaskPlan], config: GenerationConfig) -> list[Task]:
    """Tasks for ``plans`` (in the same order): the SCM's, through the hooks of the mechanisms
    that the config switches on (:mod:`prior_gen.mechanisms`)."""
    active = [(mechanism, spec) for mechanism in MECHANISMS
              if (spec := mechanism.section(config.prior)) is not None]
    tasks: list[Task | None] = [None] * len(plans)
    for i, plan in enumerate(plans):
        for mechanism, spec in active:
            if mechanism.instead_of_scm is not None and tasks[i] is None:
                tasks[i] = mechanism.instead_of_scm(plan, spec)
    synthetic = [i for i, task in enumerate(tasks) if task is None]
    for i, task in zip(synthetic, _scm_tasks([plans[i] for i in synthetic], config), strict=True):
        for mechanism, spec in active:
            if mechanism.after_scm is not None:
                task = mechanism.after_scm(task, spec)
        tasks[i] = task
    return tasks  # type: ignore[return-value]


def _scm_tasks(plans: list[TaskPlan], config: GenerationConfig) -> list[Task]:
    """The SCM's tasks for ``plans``: one batched pass per forward signature."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, plan in enumerate(plans):
        groups[plan.forward_signature()].append(i)
    tasks: list[Task | None] = [None] * len(plans)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for members in groups.values():
            raws = _forward([plans[i] for i in members], config)
            for i, raw in zip(members, raws, strict=True):
                tasks[i] = _build_with_retries(plans[i], raw, config)
    return tasks  # type: ignore[return-value]


def _forward(plans: list[TaskPlan], config: GenerationConfig) -> list[RawTask]:
    """The raw SCM outputs of ``plans`` (equal forward signatures): one batched pass."""
    scm = config.prior.scm
    return forward_group(plans, scm.init_std, scm.noise_sampler, scm.arithmetic)


def _build_with_retries(plan: TaskPlan, raw: RawTask, config: GenerationConfig) -> Task:
    scm = config.prior.scm
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return build_task(plan, raw, scm.clip, attempt, scm.arithmetic)
        except NonFiniteOutput:
            if attempt + 1 >= REDRAW_ACTIVATIONS_FROM:
                plan = redraw_activations(plan, scm.activations)
            (raw,) = _forward([plan], config)
    raise RuntimeError(
        f"task {plan.index} of stage {plan.stage}: the SCM overflowed float32 "
        f"{MAX_ATTEMPTS} times in a row; lower prior.scm.init_std"
    )


def generate_step(config: GenerationConfig, split: str, stage: Stage, step: int) -> list[Task]:
    """The ``global_batch`` tasks of ``step`` of ``stage``, in training order."""
    return generate_tasks(plan_step(config, split, stage, step), config)
