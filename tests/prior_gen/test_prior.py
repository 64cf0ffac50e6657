"""The prior itself (paper §2, §5): SCM pieces, PU construction, curriculum statistics, scopes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from prior_gen_testlib import data_digest, tiny_config

from prior_gen.engine.activations import apply_activation
from prior_gen.engine.forward import forward_group
from prior_gen.engine.gaussian import box_muller, fill_normals
from prior_gen.engine.pu import rank_labels
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.paper.factors import n_negatives, plan_step, pu_sizes
from prior_gen.paper.reference import REDRAW_ACTIVATIONS_FROM, standardize


@pytest.mark.parametrize(
    ("p", "eta", "pi", "n_tr", "n_u"),
    [
        (100, 1.0, 0.5, 200, 100),
        (100, 0.5, 0.9, 1000, 50),
        (250, 2.0, 0.1, 278, 500),
        (123, 1.37, 0.37, 196, 169),
    ],
)
def test_pu_size_formulas(p: int, eta: float, pi: float, n_tr: int, n_u: int) -> None:
    # n_tr = ceil(P / (1 - pi)), n_u = ceil(P * eta); 100 / (1 - 0.9) is 1000 despite rounding
    assert pu_sizes(p, eta, pi) == (n_tr, n_u)
    assert n_tr == math.ceil(round(p / (1 - pi), 9)) and n_u == math.ceil(round(p * eta, 9))


def test_generated_tasks_follow_the_pu_construction() -> None:
    config = tiny_config(
        prior={"dataset": {"n_labeled": [40, 80]}}, curriculum={"global_batch": 16}
    )
    for stage in (1, 3, "tail"):
        plans = plan_step(config, "train", stage, 1)
        expected = [(p.n_labeled, p.eta, p.pi, p.n_train, p.n_unlabeled) for p in plans]
        for task, (n_lab, eta, pi, n_tr, n_u) in zip(
            generate_step(config, "train", stage, 1), expected, strict=True
        ):
            assert task.n_labeled == n_lab and task.n_unlabeled == n_u
            assert (n_tr, n_u) == pu_sizes(n_lab, eta, pi)
            assert task.x.dtype == np.float32 and task.y.dtype == np.int8
            assert task.x.shape == (n_lab + n_u, task.meta["n_features"])
            assert np.all(task.y[:n_lab] == 1)  # labeled rows are positives
            negatives = int(np.count_nonzero(task.y[n_lab:] == 0))
            # |u_neg - pi n_u| < 1 follows from the ceilings (docs/architecture.md §6)
            assert abs(negatives - pi * n_u) < 1
            assert task.meta["realized_pi"] == negatives / n_u
            assert abs(n_u - eta * n_lab) < 1
            assert np.isfinite(task.x).all() and np.abs(task.x).max() <= 20


def test_labels_are_monotone_in_the_score() -> None:
    config = tiny_config(curriculum={"global_batch": 12})
    plans = plan_step(config, "train", 3, 0)
    for plan, raw in zip(plans, forward_group(plans, 0.8), strict=True):
        score = standardize(raw.score[:, None], 20.0)[:, 0]
        labels = rank_labels(score, plan.pi)
        assert np.count_nonzero(labels == 0) == n_negatives(len(score), plan.pi)
        assert score[labels == 0].min() >= score[labels == 1].max()


def test_causal_share_per_stage_is_s_over_2k() -> None:
    config = tiny_config(curriculum={"stages": 4, "steps_per_stage": 40, "global_batch": 50})
    for stage in (1, 2, 3, 4):
        flags = [p.causal for step in range(40) for p in plan_step(config, "train", stage, step)]
        expected = stage / 8
        sigma = math.sqrt(expected * (1 - expected) / len(flags))
        assert abs(np.mean(flags) - expected) < 4 * sigma, (stage, np.mean(flags))


def test_eta_and_pi_anneal_from_fixed_to_final_ranges() -> None:
    config = tiny_config(
        curriculum={"stages": 5, "steps_per_stage": 10, "tail_steps": 10, "global_batch": 40}
    )
    first = [p for s in range(10) for p in plan_step(config, "train", 1, s)]
    assert {p.eta for p in first} == {1.0} and {p.pi for p in first} == {0.5}
    for stage in (5, "tail"):
        plans = [p for s in range(10) for p in plan_step(config, "train", stage, s)]
        etas, pis = np.array([p.eta for p in plans]), np.array([p.pi for p in plans])
        assert etas.min() >= 0.5 and etas.max() <= 2.0 and pis.min() >= 0.1 and pis.max() <= 0.9
        assert etas.min() < 0.65 and etas.max() > 1.85 and pis.min() < 0.2 and pis.max() > 0.8
    middle = [p for s in range(10) for p in plan_step(config, "train", 3, s)]  # halfway
    assert min(p.pi for p in middle) >= 0.3 - 1e-12 and max(p.pi for p in middle) <= 0.7 + 1e-12


def test_default_scopes_are_respected() -> None:
    config = tiny_config(curriculum={"steps_per_stage": 6, "global_batch": 10})
    for stage in (1, 2):
        shapes = set()
        for step in range(6):
            plans = plan_step(config, "train", stage, step)
            per_step = {
                (
                    p.n_features,
                    p.n_labeled,
                    p.noise_std,
                    p.cause_dist,
                    p.activations,
                    p.label_block,
                    p.feature_selection,
                )
                for p in plans
            }
            assert len(per_step) == 1  # all tasks of a step share d, P, noise, activations, ...
            shapes |= {(p.depth, p.width) for p in plans}
        assert len(shapes) == 1  # all steps of a stage share the SCM shape
    # and across stages / steps they do vary
    assert len({plan_step(config, "train", s, 0)[0].width for s in (1, 2, 3, "tail")}) > 1
    assert len({plan_step(config, "train", 1, s)[0].n_features for s in range(6)}) > 1
    assert len({(p.eta, p.pi) for p in plan_step(config, "train", 3, 0)}) == 10  # per task


def test_scopes_are_configuration_and_independent() -> None:
    base = tiny_config(curriculum={"global_batch": 30})
    moved = tiny_config(
        curriculum={"global_batch": 30}, prior={"scopes": {"n_features": "task", "width": "step"}}
    )
    a, b = plan_step(base, "train", 2, 3), plan_step(moved, "train", 2, 3)
    assert len({p.n_features for p in b}) > 1  # now drawn per task
    assert len({p.n_features for p in a}) == 1
    # moving two factors changes nothing else (each factor has its own slot)
    for x, y in zip(a, b, strict=True):
        assert (x.n_labeled, x.eta, x.pi, x.causal, x.noise_std, x.depth) == (
            y.n_labeled,
            y.eta,
            y.pi,
            y.causal,
            y.noise_std,
            y.depth,
        )
    # heterogeneous tasks in one step still generate
    tasks = generate_step(moved, "train", 2, 3)
    assert [t.n_features for t in tasks] == [p.n_features for p in b]


def test_a_task_does_not_depend_on_its_batch() -> None:
    config = tiny_config(curriculum={"global_batch": 9})
    whole = generate_step(config, "train", 3, 2)
    for i in (0, 4, 8):
        alone = generate_tasks([plan_step(config, "train", 3, 2)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])
    assert data_digest(generate_step(config, "train", 3, 2)) == data_digest(whole)
    assert data_digest(generate_step(config, "val", 3, 2)) != data_digest(whole)


@pytest.mark.parametrize("noise_sampler", ["box_muller", "table"])
def test_overflowing_scms_are_redrawn(noise_sampler: str) -> None:
    # chains of squares at init_std 4 overflow float32; step 3 of this config hits that
    config = tiny_config(
        prior={
            "scm": {
                "depth": [12, 12],
                "width": [12, 12],
                "init_std": 4.0,
                "activations": ["square", "tanh"],
                "noise_std": [0.01],
                "n_causes": 8,
                "activation_schedule": ["per_layer"],
                "noise_sampler": noise_sampler,
            }
        },
        curriculum={"global_batch": 16},
    )
    tasks = generate_step(config, "train", 1, 3)
    assert all(np.isfinite(t.x).all() for t in tasks)
    attempts = [t.meta["attempts"] for t in tasks]
    assert max(attempts) > 1
    if noise_sampler == "box_muller":  # the legacy data's known redraw path
        assert max(attempts) >= REDRAW_ACTIVATIONS_FROM
    shared = plan_step(config, "train", 1, 3)[0].activations
    for task in tasks:  # late attempts use the task's own activations
        assert (tuple(task.meta["activations"]) == shared) == (
            task.meta["attempts"] < REDRAW_ACTIVATIONS_FROM
        )
    assert data_digest(generate_step(config, "train", 1, 3)) == data_digest(tasks)


def test_causal_and_noncausal_modes_all_occur() -> None:
    config = tiny_config(curriculum={"steps_per_stage": 40, "global_batch": 8})
    metas = [t.meta for s in range(0, 40, 3) for t in generate_step(config, "train", 3, s)]
    causal = [m for m in metas if m["causal"]]
    assert {m["label_block"] for m in causal} == {"first", "last"}
    assert {m["feature_selection"] for m in causal} == {"clique", "random"}
    assert {m["noncausal_features"] for m in metas if not m["causal"]} == {"head", "causes"}
    first = [m for m in causal if m["label_block"] == "first"]
    assert all(m["label_node"] < m["width"] for m in first)
    assert all(
        m["n_causes"] == m["n_features"]
        for m in metas
        if not m["causal"] and m["noncausal_features"] == "causes"
    )


def test_box_muller_gives_standard_normals() -> None:
    rng = np.random.Generator(np.random.PCG64DXSM(7))
    z = np.empty(2_000_000, np.float32)
    fill_normals(rng.bit_generator, z)
    z64 = z.astype(np.float64)
    se = 1 / math.sqrt(z.size)
    assert abs(z64.mean()) < 5 * se
    assert abs(z64.var() - 1) < 5 * math.sqrt(2) * se
    assert abs((z64**4).mean() - 3) < 5 * math.sqrt(96) * se
    assert abs(np.mean(np.abs(z64) < 1) - 0.682689) < 0.002
    cos, sin = box_muller(*[np.arange(1, 5, dtype=np.uint64) << np.uint64(40)] * 2)
    assert cos.shape == sin.shape == (8,)


def test_activations_match_their_definitions() -> None:
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    out = np.empty_like(x)
    exact_gelu = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(float)])
    apply_activation("gelu", x, out)
    assert np.abs(out - exact_gelu).max() < 2e-6
    zero = np.zeros(1, np.float32)
    for name, expected in [("sign", 0.0), ("heaviside", 0.0), ("rbf", 1.0), ("relu", 0.0)]:
        apply_activation(name, zero, out[:1])
        assert out[0] == expected, name
    apply_activation("sign", np.array([-2.0, 3.0], np.float32), out[:2])
    assert out[:2].tolist() == [-1.0, 1.0]


def test_standardize_and_clip() -> None:
    rng = np.random.default_rng(0)
    values = (rng.normal(size=(500, 3)) * [1, 10, 100] + 5).astype(np.float32)
    values[0, 2] = 1e6  # an outlier is clipped at 20
    out = standardize(values, 20.0)
    assert out.dtype == np.float32
    assert np.allclose(out[:, :2].mean(0), 0, atol=1e-5) and np.allclose(
        out[:, :2].std(0), 1, atol=1e-4
    )
    assert out[0, 2] == 20.0


def test_causal_node_selection() -> None:
    import dataclasses

    from prior_gen.paper.reference import select_causal_nodes

    config = tiny_config(curriculum={"global_batch": 40})
    seen = set()
    for plan in plan_step(config, "train", 3, 1):
        for label_block in ("first", "last"):
            for selection_mode in ("clique", "random"):
                for order in ("sorted", "unsorted"):
                    p = dataclasses.replace(
                        plan,
                        label_block=label_block,
                        feature_selection=selection_mode,
                        feature_order=order,
                        rng=np.random.default_rng(plan.index),
                    )
                    chosen = select_causal_nodes(p)
                    nodes, label = chosen.feature_nodes, chosen.label_node
                    total, h = (p.depth - 1) * p.width, p.width
                    assert len(nodes) == p.n_features and label not in nodes
                    assert len(set(nodes.tolist())) == p.n_features
                    assert nodes.min() >= 0 and nodes.max() < total
                    assert (label < h) if label_block == "first" else (label >= total - h)
                    if selection_mode == "clique":  # d + 1 contiguous nodes around the label
                        block = sorted([*nodes.tolist(), label])
                        assert block == list(range(block[0], block[0] + p.n_features + 1))
                    if order == "sorted" or selection_mode == "clique":
                        assert np.all(np.diff(nodes) > 0)
                    else:
                        seen.add(bool(np.all(np.diff(nodes) > 0)))
    assert False in seen  # "unsorted" random subsets keep their drawn order
