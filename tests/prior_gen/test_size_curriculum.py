"""The task-size curriculum: prior.dataset.n_labeled as {start, end}, interpolated by stage."""

from __future__ import annotations

import pytest
from prior_gen_testlib import SMOKE, tiny_config

from prior_gen.config import generation_config_from_mapping
from prior_gen.paper.factors import plan_step
from puicl_common.configio import ConfigError, load_yaml

GROWING = {"start": [10, 20], "end": [100, 300]}


def _config(n_labeled=GROWING, stages: int = 5):
    return tiny_config(
        prior={"dataset": {"n_labeled": n_labeled}},
        curriculum={"stages": stages, "steps_per_stage": 6, "tail_steps": 6},
    )


def test_ranges_per_stage_are_the_interpolation_rounded() -> None:
    config = _config()
    dataset, stages = config.prior.dataset, config.curriculum.stages
    # (s-1)/(K-1) of the way: 10 + 90·f and 20 + 280·f, rounded half up
    expected = {1: (10, 20), 2: (33, 90), 3: (55, 160), 4: (78, 230), 5: (100, 300)}
    assert {s: dataset.n_labeled_at(s, stages) for s in range(1, 6)} == expected
    assert _config(stages=1).prior.dataset.n_labeled_at(1, 1) == (100, 300)  # one stage: end


@pytest.mark.parametrize("stage, bounds", [(1, (10, 20)), (3, (55, 160)), ("tail", (100, 300))])
def test_tasks_are_drawn_from_their_stage_range(stage, bounds) -> None:
    config = tiny_config(
        prior={"dataset": {"n_labeled": GROWING}, "scopes": {"n_labeled": "task"}},
        curriculum={"stages": 5, "steps_per_stage": 6, "tail_steps": 6, "global_batch": 64},
    )
    sizes = [p.n_labeled for step in range(6) for p in plan_step(config, "train", stage, step)]
    lo, hi = bounds
    assert min(sizes) >= lo and max(sizes) <= hi
    assert min(sizes) <= lo + 0.1 * (hi - lo) and max(sizes) >= hi - 0.1 * (hi - lo)


def test_the_fixed_form_keeps_the_hash_and_the_growing_form_changes_it() -> None:
    data = load_yaml(SMOKE)
    fixed = generation_config_from_mapping(data)
    data["prior"]["dataset"]["n_labeled"] = {"start": [16, 32], "end": [16, 32]}
    same_sizes = generation_config_from_mapping(data)
    data["prior"]["dataset"]["n_labeled"] = GROWING
    growing = generation_config_from_mapping(data)
    assert fixed.identity()["prior"]["dataset"]["n_labeled"] == [16, 32]
    assert growing.identity()["prior"]["dataset"]["n_labeled"] == {
        "start": [10.0, 20.0],
        "end": [100.0, 300.0],
    }
    assert len({fixed.hash(), growing.hash()}) == 2
    # a constant curriculum draws the same sizes as the fixed range (another hash, same tasks)
    for stage in (1, 2, "tail"):
        assert [p.n_labeled for p in plan_step(fixed, "train", stage, 1)] == [
            p.n_labeled for p in plan_step(same_sizes, "train", stage, 1)
        ]


@pytest.mark.parametrize(
    "n_labeled, message",
    [
        ({"start": [0, 20], "end": [100, 300]}, "1..10,000"),
        ({"start": [30, 20], "end": [100, 300]}, "above upper bound"),
        ({"start": [10, 20]}, "missing required key"),
        ([50, 10], "above upper bound"),
    ],
)
def test_bad_size_curricula_name_the_key(n_labeled, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(n_labeled=n_labeled)
    assert "prior.dataset.n_labeled" in str(err.value) and message in str(err.value)
