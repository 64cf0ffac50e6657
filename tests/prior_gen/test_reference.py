"""Every fast path of the generator computes the reference SCM (prior_gen.paper.reference).

Task by task, for the same seed: the batched native pass (Box–Muller or table noise) and the
compiled portable pass give the reference's raw SCM output bit for bit, and the generator's
tasks are the reference's tasks (labels, rows, attempts, activations, label node), on the smoke
prior, on the paper's prior and on SCMs that overflow and are drawn again.

Each path's arithmetic (how it draws normals and rounds products and φ) is handed to the
reference by ``fast_path_arithmetic``. The reference takes the statistics of the
standardization as float64 sums row by row, as the portable path does, so portable tasks are
compared bit for bit. The native path takes the same sums in BLAS's order; its standardized
values may then differ from the reference's by what two float64 sums of n terms in different
orders can differ by, carried through the division, plus one float32 rounding each
(:func:`native_tolerance`). Where that could reorder the two rows on either side of the label
threshold (or they tie, which the native path breaks in an unspecified order), a native task is
compared on what the split guarantees instead (``undecided``).
"""

from __future__ import annotations

import numpy as np
import pytest
from fast_path_arithmetic import arithmetic_for
from prior_gen_testlib import PAPER, tiny_config

from prior_gen.config import GenerationConfig, load_generation_config
from prior_gen.engine import forward
from prior_gen.engine.pu import rank_labels_by_index
from prior_gen.generate import generate_tasks
from prior_gen.paper.factors import TaskPlan, n_negatives, plan_step
from prior_gen.paper.reference import (
    STD_FLOOR,
    negatives_by_rank,
    reference_pu_task,
    reference_raw,
    reference_scm,
    reference_task,
    standardize,
)
from prior_gen.task import Task

PATHS = {
    "native-box_muller": {"noise_sampler": "box_muller", "arithmetic": "native"},
    "native-table": {"noise_sampler": "table", "arithmetic": "native"},
    "portable": {"noise_sampler": "table", "arithmetic": "portable"},
}
UNIT_ROUNDOFF_64 = 2.0**-53
FLOAT32_ULP_AT_1 = 2.0**-23


def smoke_config(path: str, **scm_changes: object) -> GenerationConfig:
    return tiny_config(prior={"scm": {**PATHS[path], **scm_changes}})


def step_plans(config: GenerationConfig, stage: int | str, step: int) -> list[TaskPlan]:
    """Fresh plans (streams at their start): the fast path and the reference each get theirs."""
    return plan_step(config, "train", stage, step)


def native_tolerance(raw: np.ndarray, z: np.ndarray) -> np.ndarray:
    """How far the native path's standardized columns may lie from the reference's ``z``, for
    the float32 SCM output ``raw`` [n, m] they standardize.

    Each path sums n float64 terms for a column's mean and again for its variance; a sum of n
    terms is within n·2⁻⁵³·Σ|terms| of the exact one whatever the order, so the two means differ
    by at most 2·n·2⁻⁵³·mean|v| (divided by σ in standardized units), and the two σ relatively
    by less than 4·n·2⁻⁵³ (the variances by 2·n·2⁻⁵³ each way, the centering's error adding
    less), times |z|. Each path then rounds z to float32: 2⁻²⁴·|z| each.
    """
    v = raw.astype(np.float64)
    n = v.shape[0]
    sigma = np.maximum(v.std(axis=0), STD_FLOOR)
    mean_error = 2 * n * UNIT_ROUNDOFF_64 * np.abs(v).mean(axis=0) / sigma
    return mean_error + (FLOAT32_ULP_AT_1 + 4 * n * UNIT_ROUNDOFF_64) * np.abs(z)


def undecided(raw_score: np.ndarray, pi: float, clip: float) -> bool:
    """Whether the native path may label other rows negative than the reference: the last
    negative and the first positive by reference score are within the tolerance of each other."""
    z = standardize(raw_score[:, None], clip)
    tolerance = native_tolerance(raw_score[:, None], z)[:, 0]
    k = n_negatives(z.shape[0], pi)
    if k in (0, z.shape[0]):
        return False
    order = np.argsort(-z[:, 0], kind="stable")
    last_negative, first_positive = order[k - 1], order[k]
    gap = z[last_negative, 0] - z[first_positive, 0]
    return bool(gap <= tolerance[last_negative] + tolerance[first_positive])


def assert_same_split_sizes(task: Task, expected: Task) -> None:
    """What the split guarantees whichever rows tie at the threshold."""
    assert task.x.shape == expected.x.shape and task.n_labeled == expected.n_labeled
    assert np.all(task.y[: task.n_labeled] == 1)
    assert np.count_nonzero(task.y == 0) == np.count_nonzero(expected.y == 0)


def compare_step(config: GenerationConfig, stage: int | str, step: int) -> dict[str, int]:
    """Generate one step's tasks and compare each with the reference; counts of what was seen."""
    settings = config.prior.scm
    arithmetic = arithmetic_for(settings)
    native = settings.arithmetic == "native"
    seen = {"tasks": 0, "undecided": 0, "redrawn": 0, "causal": 0, "causes": 0, "head": 0}
    tasks = generate_tasks(step_plans(config, stage, step), config)
    for task, plan in zip(tasks, step_plans(config, stage, step), strict=True):
        raw, used, attempts = reference_raw(plan, settings.init_std, settings.activations,
                                            arithmetic)
        expected = reference_pu_task(used, raw, settings.clip)
        assert task.meta["attempts"] == attempts
        assert task.meta["activations"] == list(used.activations)
        assert task.meta.get("label_node") == raw.label_node
        seen["tasks"] += 1
        seen["redrawn"] += attempts > 1
        seen["causal" if plan.causal else plan.noncausal_features] += 1
        if native and undecided(raw.score, plan.pi, settings.clip):
            seen["undecided"] += 1
            assert_same_split_sizes(task, expected)
            continue
        assert task.n_labeled == expected.n_labeled
        np.testing.assert_array_equal(task.y, expected.y)
        if native:
            # per column from the statistics over all n generated rows, per value from its z
            tolerance = native_tolerance(raw.x, expected.x)
            error = np.abs(task.x.astype(np.float64) - expected.x)
            assert np.all(error <= tolerance), f"task {plan.index}: {error.max()}"
        else:
            np.testing.assert_array_equal(task.x, expected.x)
    return seen


@pytest.mark.parametrize("path", sorted(PATHS))
def test_generated_tasks_are_the_reference_tasks(path: str) -> None:
    config = smoke_config(path)
    seen: dict[str, int] = {}
    for stage in (1, 2, 3, "tail"):
        for step in range(4):
            for key, count in compare_step(config, stage, step).items():
                seen[key] = seen.get(key, 0) + count
    # every mode of the smoke prior was compared, and all but a few tasks bit for bit
    assert seen["tasks"] == 4 * 4 * 8
    assert min(seen["causal"], seen["causes"], seen["head"]) >= 10
    assert seen["undecided"] <= 2


@pytest.mark.parametrize("path", sorted(PATHS))
def test_redrawn_tasks_are_the_reference_tasks(path: str) -> None:
    # chains of squares at init_std 4 overflow float32 (as in test_prior's redraw test)
    config = tiny_config(
        prior={"scm": {**PATHS[path], "depth": [12, 12], "width": [12, 12], "init_std": 4.0,
                       "activations": ["square", "tanh"], "noise_std": [0.01],
                       "activation_schedule": ["per_layer"]}},
        curriculum={"global_batch": 16},
    )
    seen = compare_step(config, 1, 3)
    assert seen["redrawn"] >= 2


def test_paper_prior_tasks_are_the_reference_tasks() -> None:
    """configs/paper.yaml (portable arithmetic): the deepest and widest tasks, bit for bit."""
    config = load_generation_config(PAPER)
    settings = config.prior.scm
    for stage, step in ((1, 0), (100, 0), ("tail", 7)):
        fast_plans = step_plans(config, stage, step)[:8]
        reference_plans = step_plans(config, stage, step)[:8]
        for task, plan in zip(generate_tasks(fast_plans, config), reference_plans, strict=True):
            expected = reference_task(plan, settings, arithmetic_for(settings))
            np.testing.assert_array_equal(task.x, expected.x)
            np.testing.assert_array_equal(task.y, expected.y)
            assert task.n_labeled == expected.n_labeled
            assert {key: task.meta.get(key) for key in expected.meta} == expected.meta


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_task_of_a_batched_pass_has_the_reference_output(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pass over a group, cut into many chunks: every task's raw output is the reference's
    bit for bit (what a task draws and computes does not depend on its group or chunk)."""
    monkeypatch.setattr(forward, "CHUNK_ELEMENTS", 256)
    config = smoke_config(path)
    settings = config.prior.scm
    fast_plans = step_plans(config, 3, 1)
    signature = fast_plans[0].forward_signature()
    group = [i for i, plan in enumerate(fast_plans) if plan.forward_signature() == signature]
    assert len(group) >= 4
    with np.errstate(over="ignore", invalid="ignore"):
        raws = forward.forward_group([fast_plans[i] for i in group], settings.init_std,
                                 settings.noise_sampler, settings.arithmetic)
        reference_plans = step_plans(config, 3, 1)
        for i, raw in zip(group, raws, strict=True):
            expected = reference_scm(reference_plans[i], settings.init_std,
                                     arithmetic_for(settings))
            np.testing.assert_array_equal(raw.x, expected.x)
            np.testing.assert_array_equal(raw.score, expected.score)
            assert raw.label_node == expected.label_node


def test_the_portable_ranking_is_the_reference_ranking_with_ties() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):  # few distinct values: ties at the threshold in most draws
        score = rng.integers(0, 6, size=int(rng.integers(1, 40))).astype(np.float32)
        pi = float(rng.uniform(0.05, 0.95))
        np.testing.assert_array_equal(rank_labels_by_index(score, pi),
                                      negatives_by_rank(score, pi))


def test_the_native_tolerance_is_tight() -> None:
    """On the smoke prior the tolerance is two float32 ulps at most (relative to max(|z|, 1)),
    so the native comparison checks the values, not just their order of magnitude."""
    config = smoke_config("native-box_muller")
    settings = config.prior.scm
    widest = 0.0
    for stage in (1, 2, 3, "tail"):
        for plan in step_plans(config, stage, 0):
            raw, _, _ = reference_raw(plan, settings.init_std, settings.activations,
                                      arithmetic_for(settings))
            z = standardize(raw.x, settings.clip)
            relative = native_tolerance(raw.x, z) / np.maximum(np.abs(z), 1.0)
            widest = max(widest, float(relative.max()))
    assert widest <= 2 * FLOAT32_ULP_AT_1


def test_the_reference_alone_makes_tasks_of_the_pu_construction() -> None:
    """Under its own arithmetic (numpy's normals, φ as the paper writes it) the reference is a
    sample of the prior: the plan's sizes, labeled positives, ⌈π·n⌉ negatives by score, clipped
    standardized features, and another draw than the fast paths' (other normals)."""
    config = smoke_config("native-box_muller")
    settings = config.prior.scm
    fast = generate_tasks(step_plans(config, 3, 2), config)
    for plan, other in zip(step_plans(config, 3, 2), fast, strict=True):
        task = reference_task(plan, settings)
        assert task.x.shape == (plan.n_labeled + plan.n_unlabeled, plan.n_features)
        assert task.x.dtype == np.float32 and task.y.dtype == np.int8
        assert np.all(task.y[: plan.n_labeled] == 1)
        negatives = int(np.count_nonzero(task.y == 0))
        assert abs(negatives - plan.pi * plan.n_unlabeled) < 1
        assert np.isfinite(task.x).all() and np.abs(task.x).max() <= settings.clip
        assert not np.array_equal(task.x, other.x)
