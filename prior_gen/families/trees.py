"""Tree nodes: a random axis-aligned decision tree of a few parents, piecewise constant.

Each node is a complete binary tree of depth D ~ U{tree_depth} over k ~ U{parents} distinct
parents of the previous block: every split compares one of those parents (uniform) with a
threshold, the parent's value at a uniformly drawn row (so both sides of a split are usually
populated, whatever the parent's scale); the 2^D leaves hold N(0, 1) values. Trees give the
sharp, axis-aligned, piecewise-constant dependence that tree ensembles fit well and smooth MLPs
do not; TabICL's prior has tree-based SCMs besides MLP ones (arXiv 2502.05564).

Evaluation is comparisons and lookups only: exact on every CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prior_gen.families.base import Block, normals, parent_sets, uniform_integers

__all__ = ["Tree", "TreeFamily", "TreeNodes"]


@dataclass
class Tree:
    """A complete tree in heap order: split i has children 2i+1 (≤) and 2i+2 (>)."""

    features: np.ndarray  # int64 [2^D - 1]: the input row each split compares
    thresholds: np.ndarray  # float32 [2^D - 1]
    leaves: np.ndarray  # float32 [2^D]

    @property
    def depth(self) -> int:
        return int(self.leaves.shape[0]).bit_length() - 1

    def leaf_index(self, inputs: np.ndarray) -> np.ndarray:
        """int64 [n]: the leaf each column of ``inputs`` [h_in, n] falls into."""
        n = inputs.shape[1]
        rows = np.arange(n)
        node = np.zeros(n, np.int64)
        for _ in range(self.depth):
            above = inputs[self.features[node], rows] > self.thresholds[node]
            node = 2 * node + 1 + above
        return node - (self.leaves.shape[0] - 1)

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        return self.leaves[self.leaf_index(inputs)]


@dataclass
class TreeNodes:
    trees: list[Tree]

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        out = np.empty((len(self.trees), inputs.shape[1]), np.float32)
        for node, tree in enumerate(self.trees):
            out[node] = tree.evaluate(inputs)
        return out


class TreeFamily:
    name: ClassVar[str] = "tree"

    def draw(self, block: Block, columns: np.ndarray) -> TreeNodes:
        rng, spec = block.rng, block.spec
        n_inputs, n = block.inputs.shape
        count = columns.shape[0]
        depths = uniform_integers(rng, spec.tree_depth, count)
        parents = parent_sets(rng, n_inputs, uniform_integers(rng, spec.parents, count))
        trees = []
        for depth, own in zip(depths.tolist(), parents, strict=True):
            splits = (1 << depth) - 1
            features = own[uniform_integers(rng, (0, own.shape[0] - 1), splits)]
            rows = uniform_integers(rng, (0, n - 1), splits)
            thresholds = block.inputs[features, rows]
            trees.append(Tree(features, thresholds, normals(rng, 1 << depth)))
        return TreeNodes(trees)
