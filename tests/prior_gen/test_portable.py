"""Portable arithmetic (``prior.scm.arithmetic: portable``): the kernels' results, their
accuracy, the config key's versioning, and tasks that still follow the PU construction.

The golden digest under CPU variants is in test_portable_golden.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from prior_gen_testlib import PAPER, REPO, SMOKE, data_digest, tiny_config

from prior_gen.config import SCMConfig, generation_config_from_mapping, load_generation_config
from prior_gen.engine import portable
from prior_gen.engine.activations import apply_activation
from prior_gen.engine.pu import rank_labels, rank_labels_by_index
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.paper.factors import plan_step, pu_sizes
from puicl_common.configio import ConfigError, load_yaml

# the config hash of configs/smoke.yaml before prior.scm.arithmetic existed (2026-11-22)
SMOKE_HASH = "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9"
F32 = np.float32


def _portable_config(**sections):
    scm = {"noise_sampler": "table", "arithmetic": "portable", **sections.pop("scm", {})}
    return tiny_config(prior={"scm": scm, **sections.pop("prior", {})}, **sections)


def _activate(name: str, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    portable.activate(portable.ACTIVATION_CODES[name], x, out)
    return out


def _ulps(value: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps of ``value`` from the float64 ``reference``."""
    rounded = reference.astype(F32)
    tiny = np.finfo(F32).tiny
    spacing = np.spacing(np.maximum(np.abs(rounded), tiny)).astype(np.float64)
    return np.abs(value.astype(np.float64) - rounded) / spacing


def _samples() -> np.ndarray:
    rng = np.random.default_rng(5)
    scales = (1e-6, 0.01, 0.3, 1.0, 3.0, 10.0, 300.0, 3e4)
    return np.concatenate([rng.standard_normal(20_000) * s for s in scales]).astype(F32)


# -- the kernels ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, reference",
    [("tanh", np.tanh), ("rbf", lambda x: np.exp(-x * x)), ("sine", np.sin)],
)
def test_transcendental_activations_are_within_one_ulp(name: str, reference) -> None:
    x = _samples()
    assert _ulps(_activate(name, x), reference(x.astype(np.float64))).max() <= 1.0


def test_gelu_is_the_abramowitz_stegun_gelu() -> None:
    x = np.linspace(-8, 8, 4001, dtype=F32)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(float)])
    assert np.abs(_activate("gelu", x) - exact).max() < 4e-7
    native = np.empty_like(x)
    apply_activation("gelu", x, native)
    assert np.abs(_activate("gelu", x) - native).max() < 2e-6


@pytest.mark.parametrize("name", ["relu", "identity", "sign", "heaviside", "square", "abs"])
def test_exact_activations_equal_numpys(name: str) -> None:
    x = np.concatenate([_samples(), np.array([0.0, -0.0, np.inf, -np.inf], F32)])
    native = np.empty_like(x)
    apply_activation(name, x, native)
    assert np.array_equal(_activate(name, x), native)


def test_special_values() -> None:
    special = np.array([np.nan, np.inf, -np.inf, 0.0, 1e6, -3e38], F32)
    assert np.isnan(_activate("tanh", special)[0]) and np.isnan(_activate("rbf", special)[0])
    assert np.isnan(_activate("gelu", special)[0]) and np.isnan(_activate("sine", special)[0])
    assert _activate("tanh", special)[1:4].tolist() == [1.0, -1.0, 0.0]
    assert _activate("rbf", special)[1:4].tolist() == [0.0, 0.0, 1.0]
    assert _activate("gelu", special)[1] == np.inf
    sine = _activate("sine", special)
    assert np.isnan(sine[1:3]).all() and sine[3] == 0.0
    # beyond 1e5 the argument is reduced by fmod first: close to, not exactly, sin
    assert abs(float(sine[4]) - math.sin(1e6)) < 1e-7
    assert -1.0 <= sine[5] <= 1.0


@pytest.mark.parametrize("k, m, n", [(1, 3, 5), (5, 7, 19), (20, 31, 333), (36, 36, 1000)])
def test_matrix_product_sums_term_by_term_without_fma(k: int, m: int, n: int) -> None:
    rng = np.random.default_rng(k)
    weights = rng.standard_normal((k, m)).astype(F32)
    act = (rng.standard_normal((k, n)) * 10.0 ** rng.integers(-3, 4, (k, 1))).astype(F32)
    out = np.empty((m, n), F32)
    portable.matmul_t(weights, act, out)
    # the same sum in float32 numpy, every product and every sum rounded on its own
    expected = weights[0][:, None] * act[0]
    for p in range(1, k):
        expected = expected + weights[p][:, None] * act[p]
    assert np.array_equal(out, expected)


def test_forward_adds_the_table_noise_in_node_row_order_and_picks_nodes() -> None:
    """Identity weights and activations leave the causes; each block then adds
    ``table_noise(seed)`` over the [node, row] values, as prior_gen.engine.noise_table defines
    it."""
    from prior_gen.engine.noise_table import scaled_table, table_noise

    h, n, depth = 3, 7, 2
    rng = np.random.default_rng(1)
    causes = rng.standard_normal((h, n)).astype(F32)
    eye = np.eye(h, dtype=F32)
    seeds = np.array([123, 2**63 + 5], np.uint64)
    table = scaled_table(0.01)
    nodes = np.array([2, h + 0, h + 2], np.int64)  # block 0 node 2, block 1 nodes 0 and 2
    picked = np.empty((3, n), F32)
    last = np.empty((h, n), F32)
    code = np.full(depth, portable.ACTIVATION_CODES["identity"], np.int64)
    portable.forward(causes, eye, np.stack([eye] * depth), code, seeds, table, nodes, picked, last)
    first = causes + table_noise(seeds[0], table, h * n).reshape(h, n)
    second = first + table_noise(seeds[1], table, h * n).reshape(h, n)
    assert np.array_equal(last, second)
    assert np.array_equal(picked, np.stack([first[2], second[0], second[2]]))


def test_column_sums_run_row_by_row() -> None:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((777, 9)) * 10.0 ** rng.integers(-8, 9, (777, 1))
    n = values.shape[0]
    in_order = np.add.accumulate(values, axis=0)[-1]  # sequential, row 0 first
    assert np.array_equal(portable.column_means(values), in_order / n)
    squares = np.add.accumulate(values * values, axis=0)[-1]
    assert np.array_equal(portable.column_means(values * values), squares / n)


def test_ties_at_the_threshold_go_to_the_lowest_rows() -> None:
    score = np.array([0.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0, 0.5], F32)
    labels = rank_labels_by_index(score, 0.5)  # 4 negatives: rows 4, 1, then ties 2, 3
    assert labels.tolist() == [1, 0, 0, 0, 0, 1, 1, 1]
    rng = np.random.default_rng(3)
    distinct = rng.permutation(1000).astype(F32)
    for pi in (0.1, 0.37, 0.9):
        assert np.array_equal(rank_labels_by_index(distinct, pi), rank_labels(distinct, pi))


# -- the config key ------------------------------------------------------------------------------
def test_configs_without_the_key_keep_their_hash() -> None:
    data = load_yaml(SMOKE)
    data["prior"]["scm"].pop("arithmetic", None)
    absent = generation_config_from_mapping(data)
    data["prior"]["scm"]["arithmetic"] = "native"
    explicit = generation_config_from_mapping(data)
    data["prior"]["scm"].update(arithmetic="portable", noise_sampler="table")
    portable_config = generation_config_from_mapping(data)
    assert absent.prior.scm.arithmetic == "native"
    assert absent.hash() == explicit.hash() == SMOKE_HASH
    assert "arithmetic" not in absent.identity()["prior"]["scm"]
    assert portable_config.identity()["prior"]["scm"]["arithmetic"] == "portable"
    assert SCMConfig.LEGACY_VALUES["arithmetic"] == "native"


def test_paper_config_is_portable_and_older_configs_are_not() -> None:
    assert load_generation_config(PAPER).prior.scm.arithmetic == "portable"
    for path in [SMOKE, REPO / "configs" / "puicl_cpu.yaml", *REPO.glob("configs/study/*.yaml")]:
        assert load_generation_config(path).prior.scm.arithmetic == "native", path.name


@pytest.mark.parametrize(
    "scm, message",
    [
        ({"arithmetic": "fast"}, "'portable'"),
        ({"arithmetic": "portable", "noise_sampler": "box_muller"}, "noise_sampler: table"),
    ],
)
def test_bad_arithmetic_is_an_error_naming_the_key(scm: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior={"scm": scm})
    assert "prior.scm.arithmetic" in str(err.value) and message in str(err.value)


# -- the tasks -----------------------------------------------------------------------------------
def test_portable_tasks_follow_the_pu_construction() -> None:
    config = _portable_config(
        prior={"dataset": {"n_labeled": [40, 80]}}, curriculum={"global_batch": 16}
    )
    native = tiny_config(
        prior={"dataset": {"n_labeled": [40, 80]}, "scm": {"noise_sampler": "table"}},
        curriculum={"global_batch": 16},
    )
    for stage in (1, 3, "tail"):
        plans = plan_step(config, "train", stage, 1)
        tasks = generate_step(config, "train", stage, 1)
        for task, plan in zip(tasks, plans, strict=True):
            n_lab, n_u = plan.n_labeled, plan.n_unlabeled
            assert (plan.n_train, n_u) == pu_sizes(n_lab, plan.eta, plan.pi)
            assert task.n_labeled == n_lab and task.x.shape == (n_lab + n_u, plan.n_features)
            assert task.x.dtype == np.float32 and task.y.dtype == np.int8
            assert np.all(task.y[:n_lab] == 1)
            assert abs(np.count_nonzero(task.y[n_lab:] == 0) - plan.pi * n_u) < 1
            assert np.isfinite(task.x).all() and np.abs(task.x).max() <= 20
        # the same plans, other arithmetic: same shapes and labels counts, other values
        others = generate_step(native, "train", stage, 1)
        assert [t.x.shape for t in others] == [t.x.shape for t in tasks]
        assert data_digest(others) != data_digest(tasks)


def test_portable_tasks_do_not_depend_on_their_batch() -> None:
    config = _portable_config(curriculum={"global_batch": 9})
    whole = generate_step(config, "train", 3, 2)
    for i in (0, 4, 8):
        alone = generate_tasks([plan_step(config, "train", 3, 2)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])


def test_portable_overflowing_scms_are_redrawn() -> None:
    config = _portable_config(
        prior={
            "scm": {
                "depth": [12, 12],
                "width": [12, 12],
                "init_std": 4.0,
                "activations": ["square", "tanh"],
                "noise_std": [0.01],
                "n_causes": 8,
                "activation_schedule": ["per_layer"],
            }
        },
        curriculum={"global_batch": 16},
    )
    tasks = [t for step in range(4) for t in generate_step(config, "train", 1, step)]
    assert all(np.isfinite(t.x).all() for t in tasks)
    assert max(t.meta["attempts"] for t in tasks) > 1


def test_portable_weights_and_causes_are_table_normals() -> None:
    """Weights N(0, σ²_init) and normal causes N(0, 1), both from the quantile table."""
    from prior_gen.engine.noise_table import normal_table, table_normals

    bit_generator = np.random.PCG64DXSM(11)
    draws = table_normals(bit_generator, normal_table(), 400_001).astype(np.float64)
    assert np.isin(draws, normal_table()).all()
    se = 1 / math.sqrt(draws.size)
    assert abs(draws.mean()) < 5 * se and abs(draws.var() - 1) < 5 * math.sqrt(2) * se
    assert abs(np.corrcoef(draws[:-1], draws[1:])[0, 1]) < 5 * se
