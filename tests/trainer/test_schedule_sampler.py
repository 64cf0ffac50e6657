"""Learning-rate schedule at chosen steps, and the sampler policies."""

from __future__ import annotations

import pytest

from prior_gen.config import CurriculumConfig
from prior_gen.paper.curriculum import locate
from trainer.config import PhaseSchedule, TrainingConfig
from trainer.sampler import RunPlan, StepSampler
from trainer.schedule import learning_rate, phase_learning_rate

PAPER_PLAN = RunPlan(num_stages=100, steps_per_stage=750, tail_steps=25_000)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # phase 1: 75 000 steps, warmup 4 000 to 1.6e-4, power 1.5 to 1.6e-5
        (0, 1.6e-4 / 4000),
        (1999, 8e-5),
        (3999, 1.6e-4),
        (4000, 1.6e-4),
        (39_500, 1.6e-5 + 1.44e-4 * 0.5**1.5),  # half-way through the decay
        (74_999, 1.6e-5 + 1.44e-4 * (1 / 71_000) ** 1.5),
        # phase 2: 25 000 steps, warmup 2 000 to 4e-5, power 1.5 to 4e-6
        (75_000, 4e-5 / 2000),
        (76_999, 4e-5),
        (75_000 + 19_250, 4e-6 + 3.6e-5 * 0.25**1.5),  # 3/4 of the decay: 8.5e-6
        (99_999, 4e-6 + 3.6e-5 * (1 / 23_000) ** 1.5),
    ],
)
def test_paper_schedule_at_chosen_steps(step: int, expected: float) -> None:
    assert learning_rate(step, PAPER_PLAN, TrainingConfig()) == pytest.approx(expected, rel=1e-12)


def test_schedule_edges() -> None:
    assert learning_rate(75_000 + 19_250, PAPER_PLAN, TrainingConfig()) == pytest.approx(8.5e-6)
    all_warmup = PhaseSchedule(peak_lr=1.0, floor_lr=0.1, warmup_steps=10)
    assert phase_learning_rate(4, 5, all_warmup) == pytest.approx(0.5)
    no_warmup = PhaseSchedule(peak_lr=1.0, floor_lr=0.0, warmup_steps=0, decay_power=1.0)
    assert phase_learning_rate(0, 4, no_warmup) == 1.0
    assert phase_learning_rate(3, 4, no_warmup) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="outside the run's 100000 steps"):
        learning_rate(100_000, PAPER_PLAN, TrainingConfig())


CURRICULUM = CurriculumConfig(stages=3, steps_per_stage=4, tail_steps=2, global_batch=8)


def test_sequential_is_the_curriculum() -> None:
    sampler = StepSampler("sequential", CURRICULUM, seed=5)
    assert [sampler.address(t) for t in range(14)] == [locate(t, CURRICULUM) for t in range(14)]


def test_shuffled_reads_every_phase1_step_once_then_the_tail_in_order() -> None:
    sampler = StepSampler("shuffled", CURRICULUM, seed=5)
    phase1 = [sampler.address(t) for t in range(12)]
    assert sorted((a.stage, a.step_in_stage) for a in phase1) == [
        (s, i) for s in (1, 2, 3) for i in range(4)
    ]
    assert phase1 != [locate(t, CURRICULUM) for t in range(12)]
    assert [sampler.address(t) for t in (12, 13)] == [locate(t, CURRICULUM) for t in (12, 13)]


@pytest.mark.parametrize("policy", ["shuffled", "uniform", "final_stage"])
def test_policies_are_deterministic_in_seed_and_step(policy: str) -> None:
    big = CurriculumConfig(stages=50, steps_per_stage=40, tail_steps=5, global_batch=8)
    a = [StepSampler(policy, big, seed=1).address(t) for t in range(2000)]
    # a fresh sampler, queried in another order (as after a resume), gives the same addresses
    fresh = StepSampler(policy, big, seed=1)
    b = [fresh.address(t) for t in reversed(range(2000))][::-1]
    c = [StepSampler(policy, big, seed=2).address(t) for t in range(2000)]
    assert a == b
    assert a != c
    assert all(addr.phase == 1 for addr in a)
    stages = {addr.stage for addr in a}
    if policy == "final_stage":
        assert stages == {50}
    else:
        assert stages == set(range(1, 51))  # every stage reached in 2 000 draws
    assert all(0 <= addr.step_in_stage < 40 for addr in a)


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown sampler 'random'"):
        StepSampler("random", CURRICULUM, seed=0)
