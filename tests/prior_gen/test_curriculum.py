"""Global step <-> (phase, stage, step in stage)."""

from __future__ import annotations

import pytest
from prior_gen_testlib import tiny_config

from prior_gen.paper.curriculum import (
    StepAddress,
    all_stages,
    causal_probability,
    first_global_step,
    locate,
)


def test_locate_phase_boundaries() -> None:
    c = tiny_config(curriculum={"stages": 3, "steps_per_stage": 4, "tail_steps": 5}).curriculum
    assert locate(0, c) == StepAddress(1, 1, 0)
    assert locate(3, c) == StepAddress(1, 1, 3)
    assert locate(4, c) == StepAddress(1, 2, 0)
    assert locate(11, c) == StepAddress(1, 3, 3)
    assert locate(12, c) == StepAddress(2, "tail", 0)
    assert locate(16, c) == StepAddress(2, "tail", 4)
    with pytest.raises(ValueError, match=r"global step 17 is outside 0\.\.16 of the curriculum"):
        locate(17, c)
    with pytest.raises(ValueError, match="outside"):
        locate(-1, c)


def test_first_global_step_inverts_locate() -> None:
    c = tiny_config(curriculum={"stages": 5, "steps_per_stage": 3, "tail_steps": 7}).curriculum
    seen = 0
    for stage in all_stages(c):
        start = first_global_step(stage, c)
        assert start == seen
        assert locate(start, c) == StepAddress(2 if stage == "tail" else 1, stage, 0)
        seen += 7 if stage == "tail" else 3
    assert seen == c.total_steps
    with pytest.raises(ValueError, match=r"stage 6 is outside 1\.\.5"):
        first_global_step(6, c)


def test_paper_curriculum_totals() -> None:
    from prior_gen.config import CurriculumConfig

    c = CurriculumConfig()
    assert locate(74_999, c) == StepAddress(1, 100, 749)
    assert locate(75_000, c) == StepAddress(2, "tail", 0)
    assert locate(99_999, c) == StepAddress(2, "tail", 24_999)
    assert causal_probability(1, c) == pytest.approx(1 / 200)
    assert causal_probability(100, c) == causal_probability("tail", c) == pytest.approx(0.5)


def test_no_tail_curriculum() -> None:
    c = tiny_config(curriculum={"tail_steps": 0}).curriculum
    assert all_stages(c) == [1, 2, 3]
    with pytest.raises(ValueError, match="no tail"):
        first_global_step("tail", c)
