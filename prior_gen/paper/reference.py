"""The reference SCM: the prior of paper §2 for one task, written as plainly as possible.

This file says what a task *is*. The generator computes the same tasks fast: many tasks in one
batched numpy pass (``arithmetic: native``) or one compiled pass per task whose bytes do not
depend on the CPU (``arithmetic: portable``); ``tests/prior_gen/test_reference.py`` checks,
task by task, that both give what :func:`reference_task` gives for the same seed.

A task's plan (:class:`~prior_gen.paper.factors.TaskPlan`) comes from the curriculum (paper
§5): depth L_g, width h, k causes, d features, P labeled positives, η, π, one activation
function per hidden layer, the mode, and the task's own random stream. From the plan, in this order:

1. Weights (§2.1): W₀ [k, h], W₁ … W_{L_g−1} [h, h] and, for a non-causal task, the label
   readout r_y [h] and (``noncausal_features: head``) the feature readout R_x [h, d]; every
   entry ~ N(0, σ²_init), drawn as one block in that order. Biases are zero.
2. The causal choice (§2.2, causal tasks only): the label node and the d feature nodes among the
   (L_g − 1)·h hidden nodes (:func:`select_causal_nodes`).
3. The causes: n = n_tr + n_u rows uᵢ ~ N(0, I_k) or Uniform(0, 1)^k.
4. The forward pass (§2.2), rows as samples (the paper's W h written for row vectors):
   h⁰ = u W₀,  hˡ = φ_l(hˡ⁻¹) W_l + εˡ for l = 1 … L_g − 1, εˡ ~ N(0, σ²_noise), each layer's
   noise drawn when the layer is computed.
5. The readout: non-causal, x = h^{L_g−1} R_x (or x = u) and s = h^{L_g−1} r_y; causal, the
   hidden layers h¹ … h^{L_g−1} side by side are the pool of nodes, x its feature nodes and s
   its label node.
6. The labels: every column of x and s standardized over the n rows and clipped to ±clip (20); the
   ⌈π·n⌉ rows with the highest standardized score are negatives (y = 0), the others positives.
7. The PU split (§2.3): of one random permutation of the rows, the first P positives are the
   labeled rows, the first min(n_tr − P, ⌈π·n⌉) negatives leave with the training portion, and
   the remaining rows, in permutation order, are the unlabeled pool (negative share ≈ π; the
   same distribution as the paper's shuffling of each class apart).

An SCM whose output is not finite (float32 overflow: chains of square activations) is drawn again
from the continuing stream; from attempt ``REDRAW_ACTIVATIONS_FROM`` on with new activation
functions as well, since the step's functions may make every weight draw overflow.

Values are float32 as in the fast paths. Three things are left to an :class:`Arithmetic`: how
N(0, σ²) values are drawn from the stream, how a product is summed and how φ is rounded. The
reference's own (:data:`PLAIN`) is numpy's normals and products and φ as the paper writes it;
with a fast path's (Box–Muller or a quantile table, BLAS or sums in a fixed order, numpy's or
compiled kernels: ``tests/prior_gen/fast_path_arithmetic.py``) it makes that path's IEEE
operations, so the raw SCM output is compared bit for bit. The statistics of step 6 are float64
sums taken row by row here; the native path takes them in BLAS's order, which can move the last
bits (the test says by how much). The cheap steps (the causal choice, the split, the redraw
rule) are the generator's too: written once, here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from prior_gen.config import SCMConfig
from prior_gen.paper.factors import TaskPlan, n_negatives
from prior_gen.task import Task

__all__ = [
    "ACTIVATIONS",
    "MAX_ATTEMPTS",
    "PLAIN",
    "REDRAW_ACTIVATIONS_FROM",
    "STD_FLOOR",
    "Arithmetic",
    "CausalSelection",
    "RawTask",
    "dropped_negatives",
    "negatives_by_rank",
    "pu_split",
    "redraw_activations",
    "reference_pu_task",
    "reference_raw",
    "reference_scm",
    "reference_task",
    "select_causal_nodes",
    "standardize",
]

MAX_ATTEMPTS = 20
REDRAW_ACTIVATIONS_FROM = 4
STD_FLOOR = 1e-6  # a constant column is divided by this instead of 0


class Arithmetic:
    """How numbers are drawn from the stream and rounded: here numpy's normals and products
    and φ as the paper defines it, so the reference is a sample of the prior of its own. The
    tests substitute each fast path's arithmetic, which draws and rounds as that path does
    (``tests/prior_gen/fast_path_arithmetic.py``)."""

    def normals(self, rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
        """``count`` float32 draws of N(0, scale²) from ``rng``."""
        return rng.standard_normal(count, dtype=np.float32) * np.float32(scale)

    def layer_noise(self, rng: np.random.Generator, n_rows: int, width: int,
                    sigma: float) -> np.ndarray:
        """One hidden layer's noise εˡ, float32 [n_rows, width] of N(0, sigma²) from ``rng``."""
        return self.normals(rng, n_rows * width, sigma).reshape(n_rows, width)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """float32 ``a @ b`` for ``a`` [n, p] and ``b`` [p, m] or [p]."""
        return a @ b

    def activation(self, name: str, x: np.ndarray) -> np.ndarray:
        """φ_name(x), float32, elementwise."""
        return np.asarray(ACTIVATIONS[name](x), np.float32)


PLAIN = Arithmetic()  # the reference's own (it holds no state)
ACTIVATIONS = {  # the bank of §2.1
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: x * 0.5 * (1 + erf(x / np.sqrt(2))),  # x·Φ(x)
    "identity": lambda x: x,
    "sign": np.sign,  # ∈ {−1, 0, 1}
    "heaviside": lambda x: x > 0,
    "rbf": lambda x: np.exp(-x * x),
    "sine": np.sin,
    "square": np.square,
    "abs": np.abs,
}


@dataclass
class CausalSelection:
    label_node: int  # index into the pool of (L_g − 1)·h hidden nodes, layer by layer
    feature_nodes: np.ndarray  # int64 [d], in feature-column order


@dataclass
class RawTask:
    """SCM output of one task before standardization: features [n, d] and score [n]."""

    x: np.ndarray
    score: np.ndarray
    label_node: int | None = None


def select_causal_nodes(plan: TaskPlan) -> CausalSelection:
    """The label node, uniform in the first or the last hidden layer (``label_block``), and d
    feature nodes: d + 1 contiguous nodes around the label (``clique``) or d of the others drawn
    without replacement (``random``), sorted or in drawn order (``feature_order``)."""
    rng = plan.rng
    h, d = plan.width, plan.n_features
    total = (plan.depth - 1) * h
    first = 0 if plan.label_block == "first" else total - h
    label = first + int(rng.integers(0, h))
    if plan.feature_selection == "clique":
        lo = max(0, label - d)  # the window [start, start + d] must hold the label node
        hi = min(label, total - d - 1)
        start = int(rng.integers(lo, hi + 1))
        nodes = np.arange(start, start + d + 1, dtype=np.int64)
        features = nodes[nodes != label]
    else:
        drawn = rng.permutation(total - 1)[:d].astype(np.int64)
        features = drawn + (drawn >= label)  # numbered without the label node
    if plan.feature_order == "sorted":
        features = np.sort(features)
    return CausalSelection(label_node=label, feature_nodes=features)


def reference_scm(plan: TaskPlan, init_std: float, arithmetic: Arithmetic = PLAIN) -> RawTask:
    """Steps 1–5: one draw of the task's SCM and its raw output."""
    k, h, d, n, depth = plan.n_causes, plan.width, plan.n_features, plan.n_rows, plan.depth
    rng = plan.rng

    heads = 0 if plan.causal else h * (1 + (plan.noncausal_features == "head") * d)
    weights = arithmetic.normals(rng, k * h + (depth - 1) * h * h + heads, init_std)
    w_in = weights[: k * h].reshape(k, h)
    w_hidden = weights[k * h : k * h + (depth - 1) * h * h].reshape(depth - 1, h, h)
    r_y = weights[k * h + (depth - 1) * h * h :][:h]
    r_x = weights[k * h + (depth - 1) * h * h :][h:].reshape(h, -1)

    selection = select_causal_nodes(plan) if plan.causal else None

    if plan.cause_dist == "normal":
        u = arithmetic.normals(rng, n * k, 1.0).reshape(n, k)
    else:
        u = rng.random((n, k), dtype=np.float32)

    hidden = arithmetic.matmul(u, w_in)
    layers = []
    for layer in range(depth - 1):
        hidden = arithmetic.matmul(arithmetic.activation(plan.activations[layer], hidden),
                                   w_hidden[layer])
        if plan.noise_std > 0:
            hidden = hidden + arithmetic.layer_noise(rng, n, h, plan.noise_std)
        layers.append(hidden)

    if selection is not None:
        pool = np.concatenate(layers, axis=1)  # [n, (L_g − 1)·h]
        return RawTask(x=pool[:, selection.feature_nodes], score=pool[:, selection.label_node],
                       label_node=selection.label_node)
    score = arithmetic.matmul(hidden, r_y)
    x = u if plan.noncausal_features == "causes" else arithmetic.matmul(hidden, r_x)
    return RawTask(x=x, score=score)


def standardize(values: np.ndarray, clip: float) -> np.ndarray:
    """float32 (v − mean) / std clipped to ±clip, by column of float32 ``values`` [n, m]: the
    mean and the population std (floored at ``STD_FLOOR``) in float64, rows summed in order."""
    v = values.astype(np.float64)
    mean = _sum_of_rows(v) / v.shape[0]
    centered = v - mean
    std = np.maximum(np.sqrt(_sum_of_rows(centered * centered) / v.shape[0]), STD_FLOOR)
    return np.clip(centered / std, -clip, clip).astype(np.float32)


def _sum_of_rows(v: np.ndarray) -> np.ndarray:
    total = np.zeros(v.shape[1])
    for row in v:
        total += row
    return total


def negatives_by_rank(score: np.ndarray, pi: float) -> np.ndarray:
    """int8 labels: 0 for the ⌈π·n⌉ highest scores (of equal scores, the lower rows first)."""
    labels = np.ones(score.shape[0], np.int8)
    highest_first = np.argsort(-score, kind="stable")
    labels[highest_first[: n_negatives(score.shape[0], pi)]] = 0
    return labels


def pu_split(labels: np.ndarray, plan: TaskPlan) -> tuple[np.ndarray, np.ndarray]:
    """Step 7: the row indices of the labeled positives and of the unlabeled pool."""
    order = plan.rng.permutation(labels.shape[0])
    positive = labels[order] == 1  # in permutation order
    labeled = np.flatnonzero(positive)[: plan.n_labeled]
    dropped = np.flatnonzero(~positive)[: dropped_negatives(plan, int(np.count_nonzero(~positive)))]
    pool = np.ones(order.shape[0], bool)
    pool[labeled] = pool[dropped] = False
    return order[labeled], order[pool]


def dropped_negatives(plan: TaskPlan, n_negative: int) -> int:
    """How many of the ``n_negative`` negatives leave with the training portion: its rows
    beyond the P labeled positives, as far as the negatives go."""
    return min(plan.n_train - plan.n_labeled, n_negative)


def redraw_activations(plan: TaskPlan, bank: tuple[str, ...]) -> TaskPlan:
    """The plan with new activation functions from its stream (one per layer, or one shared)."""
    picks = plan.rng.integers(0, len(bank), size=plan.depth - 1)
    if plan.activation_schedule == "shared":
        picks[:] = picks[0]
    return dataclasses.replace(plan, activations=tuple(bank[i] for i in picks))


def reference_raw(plan: TaskPlan, init_std: float, bank: tuple[str, ...],
                  arithmetic: Arithmetic = PLAIN) -> tuple[RawTask, TaskPlan, int]:
    """Steps 1–5, drawn again while the output is not finite: (the raw output, the plan as
    finally used, the number of attempts)."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            raw = reference_scm(plan, init_std, arithmetic)
        if np.isfinite(raw.x).all() and np.isfinite(raw.score).all():
            return raw, plan, attempt
        if attempt + 1 >= REDRAW_ACTIVATIONS_FROM:
            plan = redraw_activations(plan, bank)
    raise RuntimeError(f"the SCM of task {plan.index} overflowed {MAX_ATTEMPTS} times")


def reference_pu_task(plan: TaskPlan, raw: RawTask, clip: float) -> Task:
    """Steps 6–7: the PU task of a finite raw output (the split draws from ``plan``'s stream)."""
    y_all = negatives_by_rank(standardize(raw.score[:, None], clip)[:, 0], plan.pi)
    labeled, unlabeled = pu_split(y_all, plan)
    rows = np.concatenate([labeled, unlabeled])
    return Task(x=standardize(raw.x, clip)[rows], y=y_all[rows], n_labeled=plan.n_labeled)


def reference_task(plan: TaskPlan, scm: SCMConfig, arithmetic: Arithmetic = PLAIN) -> Task:
    """The PU task of ``plan`` (steps 1–7) under ``prior.scm``. ``meta`` holds what the fast
    paths record beyond the arrays: ``attempts``, the ``activations`` used and, for a causal
    task, its ``label_node``."""
    raw, plan, attempts = reference_raw(plan, scm.init_std, scm.activations, arithmetic)
    task = reference_pu_task(plan, raw, scm.clip)
    task.meta = {"attempts": attempts, "activations": list(plan.activations)}
    if raw.label_node is not None:
        task.meta["label_node"] = raw.label_node
    return task
