"""Generate the tasks of one step: plan factors, run the SCMs batched, build the PU tasks.

A step is the unit of generation: its tasks are produced together, the tasks sharing a forward
signature in one batched pass (:mod:`prior_gen.scm`). Every draw comes from the task's own
stream, so the bytes of a task depend only on (config, split, stage, index).

An SCM whose output overflows float32 (chains of square activations) is drawn again from the
continuing stream of the same task: new weights, causes and noise; from attempt
``REDRAW_ACTIVATIONS_FROM`` on also new activation functions for that task alone (the step's
functions may make every weight draw overflow). Metadata records ``attempts`` and the functions
actually used. Attempt ``MAX_ATTEMPTS`` failing too is an error.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from prior_gen.categorical import discretise_task
from prior_gen.config import GenerationConfig
from prior_gen.factors import TaskPlan, plan_step
from prior_gen.pu import NonFiniteOutput, build_task
from prior_gen.reference import (
    MAX_ATTEMPTS,
    REDRAW_ACTIVATIONS_FROM,
    RawTask,
    redraw_activations,
)
from prior_gen.scm import forward_group
from prior_gen.seeding import Stage
from prior_gen.task import Task

__all__ = ["generate_step", "generate_tasks"]

def generate_tasks(plans: list[TaskPlan], config: GenerationConfig) -> list[Task]:
    """Tasks for ``plans`` (in the same order): the SCM's, or, under ``prior.real_tables``,
    some of them cut from real tables instead (:func:`_with_real_tables`)."""
    if config.prior.real_tables is not None:
        return _with_real_tables(plans, config)
    return _synthetic_tasks(plans, config)


def _with_real_tables(plans: list[TaskPlan], config: GenerationConfig) -> list[Task]:
    """The one hook of real-table tasks (``prior_gen.real_tables``): with ``skip_scm`` the
    replaced tasks are cut from their plans and only the others' SCMs run; without, every SCM
    runs and the finished tasks are replaced (as in shards made before ``skip_scm``)."""
    from prior_gen.real_tables import real_task, real_task_from_plan

    real_tables = config.prior.real_tables
    assert real_tables is not None
    cut: dict[int, Task] = {}
    if real_tables.skip_scm:
        for i, plan in enumerate(plans):
            task = real_task_from_plan(plan, real_tables)
            if task is not None:
                cut[i] = task
    rest = [plan for i, plan in enumerate(plans) if i not in cut]
    synthetic = iter([real_task(task, real_tables) for task in _synthetic_tasks(rest, config)])
    return [cut[i] if i in cut else next(synthetic) for i in range(len(plans))]


def _synthetic_tasks(plans: list[TaskPlan], config: GenerationConfig) -> list[Task]:
    """The SCM's tasks for ``plans``, categorical features included."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, plan in enumerate(plans):
        groups[plan.forward_signature()].append(i)
    tasks: list[Task | None] = [None] * len(plans)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for members in groups.values():
            raws = _forward([plans[i] for i in members], config)
            for i, raw in zip(members, raws, strict=True):
                tasks[i] = _build_with_retries(plans[i], raw, config)
    categorical = config.prior.dataset.categorical
    if categorical is not None:
        tasks = [discretise_task(task, categorical) for task in tasks]  # type: ignore[arg-type]
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
