"""studies/devsuite_ceiling.py's bound on π̂: the shortfall of an estimator that takes the
top scores for pure positives, computed from scores with known class laws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from studies import devsuite_ceiling

ROOT = Path(__file__).resolve().parents[2]

gap = devsuite_ceiling.irreducibility_gap


def test_separated_classes_leave_no_gap() -> None:
    scores = np.r_[np.linspace(0.6, 1.0, 80), np.linspace(0.0, 0.4, 20)]
    y = np.r_[np.ones(80, int), np.zeros(20, int)]
    assert gap(scores, y, top_share=0.1) == 0.0


def test_a_negative_among_the_top_scores_sets_the_gap_unless_a_purer_cut_is_allowed() -> None:
    # 10 positives and 10 negatives (π = 0.5); ranked: 4 positives, 1 negative, then the other
    # 6 positives above the other 9 negatives. With top_share 0.5 the cuts allowed hold 1
    # negative (0.1) above 5 to 10 positives (0.5 to 1.0): the best ratio is 0.1 / 1.0
    scores = np.arange(20, 0, -1, dtype=float)
    y = np.array([1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert gap(scores, y, top_share=0.5) == pytest.approx(0.5 * 0.1 / 1.0)
    # with top_share 0.1 the cut above the negative (4 positives, no negative) is allowed
    assert gap(scores, y, top_share=0.1) == 0.0


def test_tied_scores_are_one_cut() -> None:
    # every row scored alike: the only cut holds everything, so the shortfall is π itself
    y = np.r_[np.ones(30, int), np.zeros(10, int)]
    assert gap(np.full(40, 0.7), y, top_share=0.1) == pytest.approx(0.25)


def test_a_top_share_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="top_share must be in"):
        gap(np.ones(4), np.array([1, 1, 0, 1]), top_share=0.0)


def test_prior_tasks_are_read_from_every_nth_stage_and_the_tail(tmp_path: Path) -> None:
    """``--shards``: the first step of stages 1, 1 + every, ... and of the tail; one row per
    task with enough of both classes, scored on its pool only (the labeled rows left out)."""
    from prior_gen.config import load_generation_config
    from prior_gen.runner import run_generation
    from prior_gen.shards import open_shards

    config = load_generation_config(ROOT / "configs" / "smoke.yaml")
    run_generation(config, "train", [1, 2, 3, "tail"], tmp_path / "shards", workers=1)
    rows = devsuite_ceiling.prior_rows(tmp_path / "shards", "train", every=2, top_share=0.1)
    assert sorted({row["stage"] for row in rows}) == ["1", "3", "tail"]
    with open_shards(tmp_path / "shards", "train") as reader:
        tasks = reader.read_step("tail", 0)
    tail = {row["index"]: row for row in rows if row["stage"] == "tail"}
    assert tail
    for index, row in tail.items():
        task = tasks[index]
        assert row["n_pool"] == task.x.shape[0] - task.n_labeled
        assert row["pi"] == pytest.approx(float(np.mean(task.y[task.n_labeled:] == 0)))
        assert 0.0 <= row["logistic"] <= 1.0 and 0.0 <= row["gbdt"] <= 1.0
