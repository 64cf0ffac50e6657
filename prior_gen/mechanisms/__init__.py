"""Mechanisms beyond the paper's prior, each switched on by its own config key.

A mechanism is one module here and one entry in :data:`MECHANISMS`; its config dataclass is a
section of :class:`~prior_gen.config.PriorConfig` (absent, ``None``, by default and as its
legacy value: ``PriorConfig.LEGACY_VALUES``), and any stream it draws from is a scope code
of its own (``prior_gen.paper.seeding.SCOPE_CODES``). :func:`prior_gen.generate.generate_tasks`
calls the hooks, and nothing else in the generator knows a mechanism:

* ``instead_of_scm(plan, spec)``: a finished task in place of the plan's SCM, or None;
* ``after_scm(task, spec)``: a synthetic task, changed; the hooks run in the order of
  :data:`MECHANISMS`;
* ``check(spec)``: what the mechanism reads, checked once before ``prior-gen`` plans a shard
  (a ``ValueError`` ends the command in one line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prior_gen.mechanisms.categorical import discretise_task
from prior_gen.mechanisms.real_tables import load_corpus, real_task, real_task_instead_of_scm

if TYPE_CHECKING:
    from prior_gen.config import PriorConfig
    from prior_gen.paper.factors import TaskPlan
    from prior_gen.task import Task

__all__ = ["MECHANISMS", "Mechanism"]


@dataclass(frozen=True)
class Mechanism:
    """A mechanism's name, where its config sits in ``prior`` and its hooks (None: none)."""

    name: str
    section: Callable[[PriorConfig], Any]  # the mechanism's config; None: off
    instead_of_scm: Callable[[TaskPlan, Any], Task | None] | None = None
    after_scm: Callable[[Task, Any], Task] | None = None
    check: Callable[[Any], object] | None = None


MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism("categorical", lambda prior: prior.dataset.categorical, after_scm=discretise_task),
    Mechanism("real_tables", lambda prior: prior.real_tables,
              instead_of_scm=real_task_instead_of_scm, after_scm=real_task,
              check=lambda spec: load_corpus(spec.corpus, spec.sha256)),
)
