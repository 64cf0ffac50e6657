"""The SCM passes of the generator: the reference SCM (:mod:`prior_gen.paper.reference`,
paper §2.1–2.2) computed fast, with the same draws from each task's stream.

``native`` (:func:`forward_group`): tasks whose :meth:`TaskPlan.forward_signature` match (the
default scopes give every task of a step the same k, h, L_g, activations and noise level) have
their rows stacked, so each activation is one array pass for the whole group, and the depth
runs a few tasks at a time so that their hidden states stay in cache; the per-task matrix
products and all random draws use the task's own stream, so a task's values do not depend on
the rest of its group. ``portable`` (:func:`forward_portable`): one compiled pass per task in
the arithmetic of :mod:`prior_gen.engine.portable`, the same bytes on every CPU.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from prior_gen.engine.activations import apply_activation
from prior_gen.engine.gaussian import box_muller, draw_words, place_normals
from prior_gen.engine.noise_table import scaled_table, table_normals
from prior_gen.paper.factors import TaskPlan
from prior_gen.paper.reference import CausalSelection, RawTask, select_causal_nodes

__all__ = ["forward_group", "forward_portable"]


CHUNK_ELEMENTS = 1 << 16  # hidden values processed together (a chunk and its scratch fit L2)


def _chunks(rows: list[int], width: int) -> list[list[int]]:
    """Consecutive runs of task indices holding about CHUNK_ELEMENTS hidden values each."""
    chunks: list[list[int]] = [[]]
    size = 0
    for i, n in enumerate(rows):
        if chunks[-1] and size + n * width > CHUNK_ELEMENTS:
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += n * width
    return chunks


def _gather_plan(selection: CausalSelection, width: int, depth: int) -> list:
    """Per hidden block: (positions in [features..., label], columns of that block) or None."""
    nodes = np.append(selection.feature_nodes, selection.label_node)
    blocks = nodes // width
    plan: list = []
    for block in range(depth - 1):
        positions = np.flatnonzero(blocks == block)
        plan.append((positions, nodes[positions] % width) if positions.size else None)
    return plan


def _transform(words: list[tuple[np.ndarray, np.ndarray]], scale: float):
    """One Box–Muller pass over the word arrays of several tasks (in task order)."""
    return box_muller(
        np.concatenate([w[0] for w in words]), np.concatenate([w[1] for w in words]), scale
    )


@dataclass
class _Parameters:
    """The drawn parameters of a group: per-task weights, causal choices, stacked causes."""

    weights_in: list[np.ndarray]  # [k, h]
    weights_hidden: list[np.ndarray]  # [L_g − 1, h, h]
    heads: list[np.ndarray]  # non-causal: r_y [h] then R_x [h·d] (head mode)
    selections: list[CausalSelection | None]
    causes: np.ndarray  # [Σ n, k]; normal causes are filled by fill_causes (per chunk)
    cause_words: list[tuple[np.ndarray, np.ndarray] | None]  # raw words of normal causes

    def fill_causes(self, members: list[int], bounds: list[int]) -> None:
        """Transform the normal causes of tasks ``members`` (one Box–Muller pass), just before
        the chunk uses them, so that they are still in cache."""
        normal = [i for i in members if self.cause_words[i] is not None]
        if not normal:
            return
        z_cos, z_sin = _transform([self.cause_words[i] for i in normal], 1.0)
        start = 0
        for i in normal:
            flat = self.causes[bounds[i] : bounds[i + 1]].reshape(-1)
            start = place_normals(z_cos, z_sin, start, flat.shape[0], flat, add=False)
            self.cause_words[i] = None


def _draw_parameters(plans: list[TaskPlan], bounds: list[int], init_std: float) -> _Parameters:
    """Each task's stream gives, in this order: its weights, its causal node choices, its causes.
    The weights of all tasks are then transformed together (one Box–Muller pass); normal
    causes later, chunk by chunk (:meth:`_Parameters.fill_causes`)."""
    first = plans[0]
    k, h, depth = first.n_causes, first.width, first.depth
    n_core = k * h + (depth - 1) * h * h
    counts, weight_words, selections = [], [], []
    cause_words: list[tuple[np.ndarray, np.ndarray] | None] = []
    causes = np.empty((bounds[-1], k), np.float32)
    for i, plan in enumerate(plans):
        n_head = (
            0 if plan.causal else h * (1 + (plan.noncausal_features == "head") * plan.n_features)
        )
        counts.append(n_core + n_head)
        weight_words.append(draw_words(plan.rng.bit_generator, counts[-1]))
        selections.append(select_causal_nodes(plan) if plan.causal else None)
        if plan.cause_dist == "normal":
            cause_words.append(draw_words(plan.rng.bit_generator, plan.n_rows * k))
        else:
            cause_words.append(None)
            plan.rng.random(out=causes[bounds[i] : bounds[i + 1]], dtype=np.float32)

    weights_in, weights_hidden, heads = [], [], []
    z_cos, z_sin = _transform(weight_words, init_std)
    start = 0
    for count in counts:
        buffer = np.empty(count, np.float32)
        start = place_normals(z_cos, z_sin, start, count, buffer, add=False)
        weights_in.append(buffer[: k * h].reshape(k, h))
        weights_hidden.append(buffer[k * h : n_core].reshape(depth - 1, h, h))
        heads.append(buffer[n_core:])
    return _Parameters(weights_in, weights_hidden, heads, selections, causes, cause_words)


def forward_group(
    plans: list[TaskPlan],
    init_std: float,
    noise_sampler: str = "box_muller",
    arithmetic: str = "native",
) -> list[RawTask]:
    """Run the SCMs of ``plans`` (equal forward signatures) and return their raw outputs.

    ``noise_sampler`` and ``arithmetic`` are ``prior.scm``'s. Either sampler draws a block's
    noise from the task's stream when the block is computed: ``box_muller``, or ``table`` (one
    word of the stream seeds the block's noise, :mod:`prior_gen.engine.noise_table`).
    """
    if arithmetic == "portable":
        return [forward_portable(plan, init_std) for plan in plans]
    first = plans[0]
    h, depth, sigma = first.width, first.depth, first.noise_std
    rows = [plan.n_rows for plan in plans]
    bounds = [0, *itertools.accumulate(rows)]  # Python ints: cheap in the loops below
    params = _draw_parameters(plans, bounds, init_std)

    hidden = np.empty((bounds[-1], h), np.float32)
    activated = np.empty((min(hidden.shape[0], max(rows) + CHUNK_ELEMENTS // h), h), np.float32)
    # causal tasks keep only their d + 1 chosen nodes: picked[:, :d] features, [:, d] label
    picked = [
        np.empty((plan.n_rows, plan.n_features + 1), np.float32) if plan.causal else None
        for plan in plans
    ]
    gathers = [
        _gather_plan(selection, h, depth) if selection is not None else None
        for selection in params.selections
    ]

    # Run the whole depth on a few tasks at a time so that their hidden states stay in cache.
    for members in _chunks(rows, h):
        lo_chunk, hi_chunk = bounds[members[0]], bounds[members[-1] + 1]
        chunk = hidden[lo_chunk:hi_chunk]
        scratch = activated[: hi_chunk - lo_chunk]
        params.fill_causes(members, bounds)
        for i in members:
            rows_i = slice(bounds[i], bounds[i + 1])
            np.matmul(params.causes[rows_i], params.weights_in[i], out=hidden[rows_i])
        counts = [rows[i] * h for i in members]
        # per member: (activated rows, hidden rows, its weights), views made once per chunk
        products = [
            (
                scratch[bounds[i] - lo_chunk : bounds[i + 1] - lo_chunk],
                chunk[bounds[i] - lo_chunk : bounds[i + 1] - lo_chunk],
                params.weights_hidden[i],
            )
            for i in members
        ]
        picking = [
            (i, hidden_rows)
            for i, (_, hidden_rows, _) in zip(members, products, strict=True)
            if gathers[i] is not None
        ]
        table_noise = sigma > 0 and noise_sampler == "table"
        if table_noise:
            # the compiled kernel (numba) is imported only where table noise is drawn
            from prior_gen.engine.portable import add_table_noise

            table = scaled_table(sigma)
            targets = [
                (out.reshape(-1), plans[i].rng.bit_generator)
                for i, (_, out, _) in zip(members, products, strict=True)
            ]
        for layer in range(depth - 1):
            apply_activation(first.activations[layer], chunk, scratch)
            for activated_rows, hidden_rows, weights in products:
                np.matmul(activated_rows, weights[layer], out=hidden_rows)
            if table_noise:
                for flat, bit_generator in targets:
                    # one word of the task's stream seeds this block's noise
                    add_table_noise(flat, table, np.uint64(bit_generator.random_raw()))
            elif sigma > 0:
                words = [
                    draw_words(plans[i].rng.bit_generator, count)
                    for i, count in zip(members, counts, strict=True)
                ]
                z_cos, z_sin = _transform(words, sigma)
                start = 0
                for (_, hidden_rows, _), count in zip(products, counts, strict=True):
                    flat = hidden_rows.reshape(-1)
                    start = place_normals(z_cos, z_sin, start, count, flat, add=True)
            for i, hidden_rows in picking:
                if gathers[i][layer] is not None:
                    positions, columns = gathers[i][layer]
                    picked[i][:, positions] = hidden_rows[:, columns]

    return _readouts(plans, params, hidden, picked, bounds)


def _readouts(
    plans: list[TaskPlan],
    params: _Parameters,
    hidden: np.ndarray,
    picked: list[np.ndarray | None],
    bounds: list[int],
) -> list[RawTask]:
    """The raw outputs of a group after :func:`forward_group`'s pass: a causal task's picked
    nodes, a non-causal task's readout heads applied to its last hidden block ``hidden``."""
    h = hidden.shape[1]
    outputs = []
    for i, plan in enumerate(plans):
        if plan.causal:
            d = plan.n_features
            label = params.selections[i].label_node
            outputs.append(RawTask(x=picked[i][:, :d], score=picked[i][:, d], label_node=label))
            continue
        rows = slice(bounds[i], bounds[i + 1])
        last, head = hidden[rows], params.heads[i]
        score = last @ head[:h]
        if plan.noncausal_features == "causes":
            x = params.causes[rows].copy()
        else:
            x = last @ head[h:].reshape(h, plan.n_features)
        outputs.append(RawTask(x=x, score=score))
    return outputs


def forward_portable(plan: TaskPlan, init_std: float) -> RawTask:
    """The SCM of one task in the arithmetic of :mod:`prior_gen.engine.portable` (the same
    bytes on every CPU).

    Draws from the task's stream in the native pass's order (weights, causal choices, causes,
    then one word per hidden block seeding its table noise), but every normal is a lookup in
    the quantile table of :mod:`prior_gen.engine.noise_table` (scaled by σ_init for weights),
    not a Box–Muller transform, whose logarithm and sine would need more portable functions
    than the activations and cost 3× (docs/performance.md). The hidden states are laid out
    [node, row]; one compiled call runs the whole depth, the readouts are portable products.
    """
    from prior_gen.engine import portable

    k, h, d, n, depth = plan.n_causes, plan.width, plan.n_features, plan.n_rows, plan.depth
    bit_generator = plan.rng.bit_generator
    n_core = k * h + (depth - 1) * h * h
    n_head = 0 if plan.causal else h * (1 + (plan.noncausal_features == "head") * d)
    weights = table_normals(bit_generator, scaled_table(init_std), n_core + n_head)
    selection = select_causal_nodes(plan) if plan.causal else None
    if plan.cause_dist == "normal":
        causes = table_normals(bit_generator, scaled_table(1.0), n * k).reshape(n, k)
    else:
        causes = plan.rng.random((n, k), dtype=np.float32)
    noisy = plan.noise_std > 0
    seeds = bit_generator.random_raw(depth - 1) if noisy else np.empty(0, np.uint64)
    nodes = (np.empty(0, np.int64) if selection is None  # causal: features, then the label
             else np.append(selection.feature_nodes, selection.label_node).astype(np.int64))
    picked = np.empty((nodes.shape[0], n), np.float32)
    last = np.empty((h, n), np.float32)
    codes = np.array([portable.ACTIVATION_CODES[name] for name in plan.activations], np.int64)
    portable.forward(np.ascontiguousarray(causes.T), weights[: k * h].reshape(k, h),
                     weights[k * h : n_core].reshape(-1, h, h), codes, seeds,
                     scaled_table(plan.noise_std if noisy else 1.0), nodes, picked, last)
    if selection is not None:
        return RawTask(x=np.ascontiguousarray(picked[:d].T), score=picked[d],
                       label_node=selection.label_node)
    head = weights[n_core:]
    score = np.empty((1, n), np.float32)
    portable.matmul_t(head[:h].reshape(h, 1), last, score)
    if plan.noncausal_features == "causes":
        return RawTask(x=causes, score=score[0])
    x_t = np.empty((d, n), np.float32)
    portable.matmul_t(head[h:].reshape(h, d), last, x_t)
    return RawTask(x=np.ascontiguousarray(x_t.T), score=score[0])
