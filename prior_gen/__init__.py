"""Synthetic PU prior (paper §2, §5): random MLP SCMs, the curriculum, and the shards.

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.

``paper/`` is what a task is (``paper/reference.py``: §2 for one task, plainly), ``engine/``
computes the same tasks fast and the same on every CPU, ``mechanisms/`` holds what goes beyond
the paper, ``shards/`` the tasks on disk (docs/architecture.md §6). Public entry points:
``prior-gen`` (:mod:`prior_gen.cli`), :func:`prior_gen.shards.open_shards` (the one reader of
stored tasks), :func:`prior_gen.paper.curriculum.locate`, and
:func:`prior_gen.generate.generate_step` (tasks of one step, in memory). Submodules are imported
on demand so that ``import prior_gen`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GenerationConfig": "prior_gen.config",
    "load_generation_config": "prior_gen.config",
    "KNOWN_SECTIONS": "prior_gen.config",
    "locate": "prior_gen.paper.curriculum",
    "StepAddress": "prior_gen.paper.curriculum",
    "generate_step": "prior_gen.generate",
    "open_shards": "prior_gen.shards",
    "ShardReader": "prior_gen.shards",
    "ShardMismatchError": "prior_gen.shards",
    "ShardCorruptError": "prior_gen.shards",
    "Task": "prior_gen.task",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'prior_gen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
