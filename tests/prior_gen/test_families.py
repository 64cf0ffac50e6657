"""Function families of the hidden nodes (prior.scm.families, prior_gen.families): each family
is what it claims, the MLP family is the paper's node, and the family pass is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from prior_gen_testlib import data_digest, tiny_config

from prior_gen.factors import plan_step
from prior_gen.families import FAMILIES, Block
from prior_gen.families.forward import forward_families
from prior_gen.families.product import unit_rms
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.mechanisms_config import FamiliesConfig
from prior_gen.scm import forward_portable

PORTABLE = {"noise_sampler": "table", "arithmetic": "portable"}
ALL = {"mlp": 1.0, "tree": 1.0, "threshold": 1.0, "product": 1.0, "linear": 1.0}


def _config(weights=ALL, **families):
    return tiny_config(prior={"scm": {**PORTABLE, "families": {"weights": weights, **families}}})


def _block(seed: int = 0, h_in: int = 6, n: int = 200, **spec) -> Block:
    data = np.random.default_rng(seed)
    inputs = data.standard_normal((h_in, n)).astype(np.float32)
    weights = data.standard_normal((h_in, 5)).astype(np.float32)
    return Block(
        inputs=inputs,
        weights=weights,
        activation="tanh",
        rng=np.random.default_rng(seed + 1),
        spec=FamiliesConfig(**spec),
        init_std=0.8,
    )


def _draw(name: str, seed: int = 0, count: int = 5, **spec):
    block = _block(seed, **spec)
    return block, FAMILIES[name].draw(block, np.arange(count))


# -- every family: shape, dtype, determinism ---------------------------------------------------
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_gives_float32_nodes_by_rows_and_is_deterministic(name: str) -> None:
    block, nodes = _draw(name)
    values = nodes.evaluate(block.inputs)
    assert values.shape == (5, 200) and values.dtype == np.float32
    assert np.isfinite(values).all()
    again_block, again = _draw(name)
    assert np.array_equal(again.evaluate(again_block.inputs), values)
    other_block, other = _draw(name, seed=7)
    assert not np.array_equal(other.evaluate(other_block.inputs), values)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_node_is_a_function_of_its_row_alone(name: str) -> None:
    """Evaluated on a subset of the rows, a node gives the same values on them (product nodes
    rescale by the rows' RMS, so they are checked on the full set with rows permuted)."""
    block, nodes = _draw(name)
    values = nodes.evaluate(block.inputs)
    order = np.random.default_rng(3).permutation(200)
    assert np.array_equal(
        nodes.evaluate(np.ascontiguousarray(block.inputs[:, order])), values[:, order]
    )


# -- each family is what it claims ------------------------------------------------------------
def test_mlp_nodes_are_the_papers_layer() -> None:
    block, nodes = _draw("mlp", count=5)
    expected = block.weights.astype(np.float64).T @ np.tanh(block.inputs.astype(np.float64))
    assert np.allclose(nodes.evaluate(block.inputs), expected, rtol=1e-4, atol=1e-4)
    # a subset of the columns gives those columns' values, to the bit
    subset = FAMILIES["mlp"].draw(block, np.array([1, 3]))
    assert np.array_equal(subset.evaluate(block.inputs), nodes.evaluate(block.inputs)[[1, 3]])


def test_tree_nodes_are_piecewise_constant_on_axis_aligned_cells() -> None:
    block, nodes = _draw("tree", count=8, tree_depth=(2, 3), parents=(1, 3))
    values = nodes.evaluate(block.inputs)
    for tree, row in zip(nodes.trees, values, strict=True):
        assert np.unique(row).size <= 2**tree.depth  # at most one value per leaf
        assert set(np.unique(row)) <= set(tree.leaves.tolist())
        # rows in the same cell (same side of every split threshold) have the same value
        splits = zip(tree.features, tree.thresholds, strict=True)
        signature = np.stack([block.inputs[f] > t for f, t in splits])
        for cell in np.unique(signature, axis=1).T:
            same = (signature == cell[:, None]).all(axis=0)
            assert np.unique(row[same]).size == 1
        # it reads only its parents: changing the other inputs changes nothing
        others = np.setdiff1d(np.arange(6), tree.features)
        moved = block.inputs.copy()
        moved[others] += 5.0
        assert np.array_equal(tree.evaluate(moved), row)


def test_threshold_nodes_are_monotone_staircases_of_one_parent() -> None:
    block, nodes = _draw("threshold", count=6, thresholds=(1, 4))
    values = nodes.evaluate(block.inputs)
    for i, row in enumerate(values):
        parent, cuts, weight = nodes.parents[i], nodes.thresholds[i], nodes.weights[i]
        assert np.unique(row).size <= cuts.shape[0] + 1
        level = (block.inputs[parent][:, None] > cuts[None, :]).sum(axis=1)
        assert np.array_equal(row, level.astype(np.float32) * weight)
        order = np.argsort(block.inputs[parent], kind="stable")
        steps = np.diff(row[order]) * np.sign(weight)
        assert (steps >= 0).all()  # monotone in its parent


def test_product_nodes_are_pairwise_interactions() -> None:
    block, nodes = _draw("product", count=12)
    values = nodes.evaluate(block.inputs)
    pure = 0
    for row, (p, q), (a, b, c) in zip(values, nodes.pairs, nodes.coefficients, strict=True):
        assert p != q
        xp, xq = block.inputs[p].astype(np.float64), block.inputs[q].astype(np.float64)
        product = xp * xq
        expected = a * product / np.sqrt(np.mean(product**2)) + b * xp + c * xq
        assert np.allclose(row, expected, rtol=1e-4, atol=1e-4)
        pure += b == 0 and c == 0
    assert 0 < pure < 12  # with and without main effects
    assert np.isclose(np.sqrt(np.mean(unit_rms(block.inputs[0] * 1e6).astype(np.float64) ** 2)), 1)


def test_linear_nodes_are_sums_of_a_few_weighted_parents() -> None:
    block, nodes = _draw("linear", count=8, parents=(1, 3))
    values = nodes.evaluate(block.inputs)
    sizes = set()
    for row, parents, weights in zip(values, nodes.parents, nodes.weights, strict=True):
        sizes.add(parents.shape[0])
        assert len(set(parents.tolist())) == parents.shape[0]
        expected = (weights[:, None].astype(np.float64) * block.inputs[parents]).sum(axis=0)
        assert np.allclose(row, expected, rtol=1e-5, atol=1e-5)
    assert sizes <= {1, 2, 3} and len(sizes) > 1


# -- the family pass --------------------------------------------------------------------------
def test_all_mlp_nodes_give_the_bytes_of_the_portable_pass() -> None:
    plain = tiny_config(prior={"scm": PORTABLE})
    mlp = _config({"mlp": 1.0})
    plans = zip(plan_step(plain, "train", 2, 1), plan_step(mlp, "train", 2, 1), strict=True)
    for plan_a, plan_b in plans:
        a, b = forward_portable(plan_a, 0.8), forward_families(plan_b, 0.8, mlp.prior.scm.families)
        assert np.array_equal(a.x, b.x) and np.array_equal(a.score, b.score)
    tasks_a, tasks_b = generate_step(plain, "train", 3, 0), generate_step(mlp, "train", 3, 0)
    for a, b in zip(tasks_a, tasks_b, strict=True):
        assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
        assert b.meta["node_families"] == {"mlp": (b.meta["depth"] - 1) * b.meta["width"]}


def test_families_are_mixed_by_their_weights_per_node() -> None:
    tasks = [
        t
        for stage in (1, 3)
        for step in (0, 1)
        for t in generate_step(_config(), "train", stage, step)
    ]
    totals = {name: sum(t.meta["node_families"][name] for t in tasks) for name in ALL}
    nodes = sum(totals.values())
    assert all(abs(count / nodes - 0.2) < 0.05 for count in totals.values()), totals
    mixed = [t for t in tasks if sum(v > 0 for v in t.meta["node_families"].values()) > 1]
    assert len(mixed) == len(tasks)
    trees = _config({"mlp": 0.0, "tree": 1.0})
    assert all(
        set(t.meta["node_families"]) == {"tree"} for t in generate_step(trees, "train", 1, 0)
    )


def test_scope_task_gives_each_task_one_family() -> None:
    config = _config(scope="task")
    tasks = [t for step in range(4) for t in generate_step(config, "train", 2, step)]
    kinds = set()
    for task in tasks:
        used = [name for name, count in task.meta["node_families"].items() if count]
        assert len(used) == 1
        kinds.add(used[0])
    assert len(kinds) >= 4


def test_family_tasks_are_deterministic_and_do_not_depend_on_their_batch() -> None:
    config = _config()
    whole = generate_step(config, "train", 2, 1)
    assert data_digest(generate_step(config, "train", 2, 1)) == data_digest(whole)
    for i in (0, 5):
        alone = generate_tasks([plan_step(config, "train", 2, 1)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])
    # the families stream is the task's own: other weights leave the main stream's draws (the
    # causal choices) as they were
    other = generate_step(_config({"tree": 1.0, "mlp": 3.0}), "train", 2, 1)
    assert [t.meta.get("label_node") for t in other] == [t.meta.get("label_node") for t in whole]


def test_product_only_scms_do_not_overflow() -> None:
    config = tiny_config(
        prior={"scm": {**PORTABLE, "depth": [5, 5], "families": {"weights": {"product": 1.0}}}}
    )
    tasks = generate_step(config, "train", 3, 0)
    assert all(t.meta["attempts"] == 1 and np.isfinite(t.x).all() for t in tasks)


def test_tree_scms_are_piecewise_constant_up_to_the_block_noise() -> None:
    """Causal features of a tree-only SCM are tree nodes: without noise at most 2^3 values per
    column, with the table noise of σ_noise many more."""

    def features(noise: float) -> list[np.ndarray]:
        scm = {**PORTABLE, "noise_std": [noise], "families": {"weights": {"tree": 1.0}}}
        config = tiny_config(prior={"scm": scm}, curriculum={"causal_final": 1.0})
        plans = plan_step(config, "train", 3, 0)
        assert all(plan.causal for plan in plans)
        return [forward_families(plan, 0.8, config.prior.scm.families).x for plan in plans]

    for quiet, noisy in zip(features(0.0), features(0.02), strict=True):
        for j in range(quiet.shape[1]):
            assert np.unique(quiet[:, j]).size <= 8
            assert np.unique(noisy[:, j]).size > 8
