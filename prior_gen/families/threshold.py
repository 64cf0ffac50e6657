"""Threshold (discretisation) nodes: a staircase of one parent, x = w · #{i : a_p > t_i}.

A parent read only through a few cut points: the node carries its level, not its value, as
binned or thresholded quantities do in real tables (age bands, "above the limit"). Monotone in
the parent (a tree node need not be). m ~ U{thresholds} cut points, each the parent's value at
a uniformly drawn row; w ~ N(0, 1). Comparisons, a count and one float32 product: exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prior_gen.families.base import Block, normals, uniform_integers

__all__ = ["ThresholdFamily", "ThresholdNodes"]


@dataclass
class ThresholdNodes:
    parents: np.ndarray  # int64 [count]
    thresholds: list[np.ndarray]  # per node: float32 cut points
    weights: np.ndarray  # float32 [count]

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        out = np.empty((self.parents.shape[0], inputs.shape[1]), np.float32)
        for node, (parent, cuts) in enumerate(zip(self.parents, self.thresholds, strict=True)):
            level = np.count_nonzero(inputs[parent][None, :] > cuts[:, None], axis=0)
            np.multiply(level.astype(np.float32), self.weights[node], out=out[node])
        return out


class ThresholdFamily:
    name: ClassVar[str] = "threshold"

    def draw(self, block: Block, columns: np.ndarray) -> ThresholdNodes:
        rng = block.rng
        n_inputs, n = block.inputs.shape
        count = columns.shape[0]
        parents = uniform_integers(rng, (0, n_inputs - 1), count)
        sizes = uniform_integers(rng, block.spec.thresholds, count)
        thresholds = [
            block.inputs[parent, uniform_integers(rng, (0, n - 1), int(size))]
            for parent, size in zip(parents, sizes, strict=True)
        ]
        return ThresholdNodes(parents, thresholds, normals(rng, count))
