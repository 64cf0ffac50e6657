"""Which stored step a global training step reads: the sampler policies.

A run has ``K * S`` phase-1 steps (the curriculum: stages 1..K of S steps each) followed by
``T`` phase-2 steps (the final-stage tail). The phase -- and so the learning-rate schedule --
is always decided by the position of the global step; the policy decides which stored step of
the shards feeds it:

* ``sequential``  -- the paper's curriculum: step t reads ``prior_gen.paper.curriculum.locate(t)``.
* ``shuffled``    -- phase 1 reads the same K*S stored steps, each exactly once, in a random
                     order (the curriculum's data without its order).
* ``uniform``     -- phase 1 step t reads a stage drawn uniformly from 1..K and a step drawn
                     uniformly inside it (with replacement).
* ``final_stage`` -- phase 1 step t reads a step drawn uniformly from stage K (no curriculum,
                     hardest ranges from the start).

Phase 2 reads the tail in order under every policy. Draws come from
``SeedSequence(seed, spawn_key=(SAMPLER_KEY, policy code, t))`` (the shuffle from the same
key without ``t``; SAMPLER_KEY keeps these streams apart from the prior generator's, whose
first spawn-key word is a split code, 0 or 1), so the address of a step depends only on the
run's seed and the step -- never on the world size, the rank or whether the run was resumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from prior_gen.config import CurriculumConfig
from prior_gen.paper.curriculum import StepAddress, locate

# second word of every sampler seed key: keeps these draws apart from the prior generator's
SAMPLER_KEY = 0x5A3D1E
_POLICY_CODES = {"sequential": 0, "shuffled": 1, "uniform": 2, "final_stage": 3}


@dataclass(frozen=True)
class RunPlan:
    """Lengths of the two phases of a run, from its curriculum config."""

    num_stages: int  # K
    steps_per_stage: int  # S
    tail_steps: int  # T

    @classmethod
    def from_curriculum(cls, curriculum: CurriculumConfig) -> RunPlan:
        return cls(curriculum.stages, curriculum.steps_per_stage, curriculum.tail_steps)

    @property
    def phase1_steps(self) -> int:
        return self.num_stages * self.steps_per_stage

    @property
    def total_steps(self) -> int:
        return self.phase1_steps + self.tail_steps

    def phase_position(self, global_step: int) -> tuple[int, int, int]:
        """``(phase, step in phase, phase length)`` of a global step; phase is 1 or 2."""
        if not 0 <= global_step < self.total_steps:
            raise ValueError(
                f"step {global_step} is outside the run's {self.total_steps} steps "
                f"({self.num_stages} stages x {self.steps_per_stage} + {self.tail_steps} tail)"
            )
        if global_step < self.phase1_steps:
            return 1, global_step, self.phase1_steps
        return 2, global_step - self.phase1_steps, self.tail_steps


class StepSampler:
    """Maps global steps to stored steps under one policy (see the module docstring)."""

    def __init__(self, policy: str, curriculum: CurriculumConfig, seed: int) -> None:
        if policy not in _POLICY_CODES:
            raise ValueError(f"unknown sampler {policy!r}; choose one of {sorted(_POLICY_CODES)}")
        self.policy = policy
        self.curriculum = curriculum
        self.plan = RunPlan.from_curriculum(curriculum)
        self.seed = seed

    def _rng(self, *words: int) -> np.random.Generator:
        spawn_key = (SAMPLER_KEY, _POLICY_CODES[self.policy], *words)
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=spawn_key))

    @cached_property
    def _permutation(self) -> np.ndarray:
        return self._rng().permutation(self.plan.phase1_steps)

    def address(self, global_step: int) -> StepAddress:
        """The stored (phase, stage, step in stage) that global step ``global_step`` reads."""
        phase, _, _ = self.plan.phase_position(global_step)
        if phase == 2 or self.policy == "sequential":
            return locate(global_step, self.curriculum)
        if self.policy == "shuffled":
            return locate(int(self._permutation[global_step]), self.curriculum)
        rng = self._rng(global_step)
        if self.policy == "uniform":
            stage = int(rng.integers(1, self.plan.num_stages + 1))
        else:  # final_stage
            stage = self.plan.num_stages
        step = int(rng.integers(0, self.plan.steps_per_stage))
        return StepAddress(phase=1, stage=stage, step_in_stage=step)

    def addresses(self, start: int, stop: int) -> Iterator[tuple[int, StepAddress]]:
        """``(global step, address)`` for every step of ``[start, stop)``."""
        for global_step in range(start, stop):
            yield global_step, self.address(global_step)
