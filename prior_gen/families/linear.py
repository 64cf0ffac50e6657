"""Linear nodes: x = Σ_i w_i · a_{p_i} over a few parents, with no activation.

Additive linear structure is where linear models are strong and a random MLP rarely puts a
node (each MLP node sees all parents through a nonlinearity). Weights N(0, σ_init²) as the
MLP's; the sum runs over the parents in their drawn order, in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prior_gen.families.base import Block, normals, parent_sets, uniform_integers

__all__ = ["LinearFamily", "LinearNodes"]


@dataclass
class LinearNodes:
    parents: list[np.ndarray]  # per node: int64 parent indices
    weights: list[np.ndarray]  # per node: float32, one per parent

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        out = np.empty((len(self.parents), inputs.shape[1]), np.float32)
        for node, (parents, weights) in enumerate(zip(self.parents, self.weights, strict=True)):
            row = out[node]
            np.multiply(inputs[parents[0]], weights[0], out=row)
            for p, w in zip(parents[1:], weights[1:], strict=True):
                row += inputs[p] * w  # float32 product, then one float32 addition
        return out


class LinearFamily:
    name: ClassVar[str] = "linear"

    def draw(self, block: Block, columns: np.ndarray) -> LinearNodes:
        rng = block.rng
        sizes = uniform_integers(rng, block.spec.parents, columns.shape[0])
        parents = parent_sets(rng, block.inputs.shape[0], sizes)
        weights = [normals(rng, p.shape[0], block.init_std) for p in parents]
        return LinearNodes(parents=parents, weights=weights)
