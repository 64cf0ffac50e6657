"""The SCM forward pass of one task whose hidden nodes are drawn from function families.

Runs only under ``prior.scm.families`` (which needs ``arithmetic: portable``). Block by block,
in the layout [node, row] of :func:`prior_gen.scm.forward_portable`:

1. every node of the block draws its family with the configured weights (``scope: node``;
   under ``scope: task`` the task drew one family for all its nodes), one uniform per node
   from the task's ``families`` stream;
2. each family present draws and evaluates its nodes (in the sorted order of the family
   names) from the previous block's values;
3. the block's table noise is added to all its nodes, and the causal nodes are picked.

The task's main stream gives what it gives the portable pass, in the same order (weights,
causal choices, causes, one noise seed per block; later the PU split), so the families'
draws shift none of it, and a task whose nodes are all MLP nodes has exactly the bytes of the
portable pass (tested). The ``families`` stream is keyed by the task and the attempt
(``prior_gen.seeding.task_stream``): a redrawn SCM draws new families and parameters too.

Why Python per block rather than one compiled call: any family can be added as a small numpy
module. The price is Python overhead per node, which dominates at the paper's sizes
(docs/training.md §10 gives the rates); vectorising tree and threshold nodes across a block
would recover most of it.
"""

from __future__ import annotations

import numpy as np

from prior_gen.factors import TaskPlan
from prior_gen.families import FAMILIES
from prior_gen.families.base import Block
from prior_gen.mechanisms_config import FamiliesConfig
from prior_gen.noise_table import noise_adder
from prior_gen.scm import RawTask, draw_portable, readout_portable
from prior_gen.seeding import task_stream

__all__ = ["FamilyChooser", "forward_families"]


class FamilyChooser:
    """Draws the family of each node from the configured weights (names in sorted order)."""

    def __init__(self, spec: FamiliesConfig, rng: np.random.Generator) -> None:
        self.names = sorted(name for name, weight in spec.weights.items() if weight > 0)
        weights = np.array([spec.weights[name] for name in self.names], np.float64)
        self.bounds = np.cumsum(weights) / weights.sum()
        self.rng = rng
        # scope task: one draw for the whole task, before any block's draws
        self.fixed = self._pick(rng.random(1))[0] if spec.scope == "task" else None

    def _pick(self, u: np.ndarray) -> np.ndarray:
        return np.minimum(np.searchsorted(self.bounds, u, side="right"), len(self.names) - 1)

    def block(self, width: int) -> np.ndarray:
        """int64 [width]: the index (into ``names``) of each node's family."""
        if self.fixed is not None:
            return np.full(width, self.fixed, np.int64)
        return self._pick(self.rng.random(width))


def forward_families(
    plan: TaskPlan, init_std: float, spec: FamiliesConfig, attempt: int = 1
) -> RawTask:
    """The raw output of ``plan``'s SCM with family nodes; its metadata ``node_families``
    counts the hidden nodes of each family."""
    from prior_gen import portable

    draws = draw_portable(plan, init_std)
    rng = task_stream(plan.seed_key, "families", attempt)
    chooser = FamilyChooser(spec, rng)
    h, n = plan.width, plan.n_rows
    hidden = np.empty((h, n), np.float32)
    portable.matmul_t(draws.input_weights(plan), np.ascontiguousarray(draws.causes.T), hidden)
    weights = draws.hidden_weights(plan)
    nodes = draws.nodes()
    picked = np.empty((nodes.shape[0], n), np.float32)
    add_noise = noise_adder()
    counts = dict.fromkeys(chooser.names, 0)
    for layer in range(plan.depth - 1):
        choice = chooser.block(h)
        block = Block(hidden, weights[layer], plan.activations[layer], rng, spec, init_std)
        values = np.empty((h, n), np.float32)
        for index, name in enumerate(chooser.names):
            columns = np.flatnonzero(choice == index)
            if columns.size:
                values[columns] = FAMILIES[name].draw(block, columns).evaluate(hidden)
                counts[name] += int(columns.size)
        if draws.seeds.shape[0]:
            add_noise(values.reshape(-1), draws.table, draws.seeds[layer])
        for q in np.flatnonzero(nodes // h == layer):
            picked[q] = values[nodes[q] % h]
        hidden = values
    raw = readout_portable(plan, draws, picked, hidden)
    raw.meta["node_families"] = counts
    return raw
