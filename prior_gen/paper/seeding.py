"""Seed keys: every random draw is keyed by *what* is drawn (docs/architecture.md §3).

A scope object (a stage, a step or a task of one split) draws from
``SeedSequence(entropy=seed, spawn_key=(split_code, stage_code, scope_code, position))``
(docs/architecture.md §6, "Factors and seeds"). The scope code keeps step 3 and task 3 of a
stage apart; the tail's stage code 0 is no phase-1 stage's (1..K), whatever K is.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SCOPE_CODES",
    "SPLIT_CODES",
    "TAIL",
    "generator_for_key",
    "scope_generator",
    "seed_key",
    "stage_code",
    "task_stream",
]

SPLIT_CODES = {"train": 0, "val": 1}
# A task's other streams, keyed like the task with their own scope code: categorical
# (discretising its features, prior_gen.mechanisms.categorical), real_tables (its rows from a
# corpus of real tables, prior_gen.mechanisms.real_tables). Codes 4-9 belonged to mechanisms
# that lost the prior study (docs/recipe.md, git tag prior-study-2026-11) and are never
# reused. Append new codes, never renumber.
SCOPE_CODES = {"stage": 0, "step": 1, "task": 2, "categorical": 3, "real_tables": 10}
TAIL = "tail"  # the stage identifier of phase 2
_TAIL_CODE = 0

Stage = int | str


def stage_code(stage: Stage) -> int:
    """Seed code of a stage: 1..K for phase 1, 0 for the tail."""
    if stage == TAIL:
        return _TAIL_CODE
    if isinstance(stage, bool) or not isinstance(stage, (int, np.integer)) or stage < 1:
        raise ValueError(f"a stage is an integer >= 1 or {TAIL!r}, got {stage!r}")
    return int(stage)


def seed_key(seed: int, split: str, stage: Stage, scope: str, position: int) -> list[int]:
    """The full key ``[seed, split, stage, scope, position]`` stored in task metadata."""
    if split not in SPLIT_CODES:
        raise ValueError(f"split must be one of {sorted(SPLIT_CODES)}, got {split!r}")
    return [int(seed), SPLIT_CODES[split], stage_code(stage), SCOPE_CODES[scope], int(position)]


def scope_generator(
    seed: int, split: str, stage: Stage, scope: str, position: int
) -> np.random.Generator:
    """The random stream of one scope object (PCG64DXSM: fast, statistically strong)."""
    return generator_for_key(seed_key(seed, split, stage, scope, position))


def generator_for_key(key: list[int]) -> np.random.Generator:
    """The random stream of the scope object whose full key (:func:`seed_key`) is ``key``."""
    sequence = np.random.SeedSequence(entropy=key[0], spawn_key=tuple(key[1:]))
    return np.random.Generator(np.random.PCG64DXSM(sequence))


def task_stream(task_key: tuple[int, ...] | list[int], scope: str) -> np.random.Generator:
    """A task's stream of scope ``scope`` (``categorical``, ``real_tables``): the task's key
    (:func:`seed_key`) with that scope code."""
    seed, split, stage, _, index = task_key
    return generator_for_key([int(seed), int(split), int(stage), SCOPE_CODES[scope], int(index)])
