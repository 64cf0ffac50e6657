"""The interface of a function family of hidden nodes, and the draws the families share.

A hidden block of the SCM (paper §2.1) is h nodes, each a function of the previous block's
values (h⁰ = W₀u for the first block). Under ``prior.scm.families`` every node draws a family;
for each family, the block's nodes of that family are drawn at once by
:meth:`NodeFamily.draw` and evaluated by :meth:`Nodes.evaluate`, which returns their values
before the block's noise (``prior_gen.families.forward`` adds it to all nodes alike).

Rules every family follows (they keep the data portable and deterministic,
docs/architecture.md §6):

* parameters come from ``block.rng``, the task's ``families`` stream, in a fixed order, or, for
  the MLP family, from the block's weight matrix drawn from the task's main stream;
* normals come from the quantile table (:func:`normals`), not a Box–Muller transform;
* arithmetic is elementwise IEEE float32 (+ − × ÷ sqrt, comparisons, lookups) or the numba
  kernels of :mod:`prior_gen.portable`; no BLAS product and no numpy transcendental function,
  whose last bits depend on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from prior_gen.mechanisms_config import FamiliesConfig
from prior_gen.noise_table import scaled_table

__all__ = ["Block", "NodeFamily", "Nodes", "normals", "parent_sets", "uniform_integers"]


@dataclass
class Block:
    """What a family sees when it draws the nodes of one hidden block."""

    inputs: np.ndarray  # float32 [h_in, n]: the previous block's values, one row per node
    weights: np.ndarray  # float32 [h_in, h]: this block's MLP weights (the task's main stream)
    activation: str  # this block's activation φ_l (prior_gen.config.ACTIVATION_NAMES)
    rng: np.random.Generator  # the task's families stream
    spec: FamiliesConfig
    init_std: float  # σ_init of the MLP weights (prior.scm.init_std)


class Nodes(Protocol):
    """Drawn nodes of one family in one block."""

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        """float32 [count, n]: the nodes' values for ``inputs`` float32 [h_in, n]."""
        ...


class NodeFamily(Protocol):
    """A function family. ``columns``: the block's node indices (0..h-1) it computes."""

    name: ClassVar[str]

    def draw(self, block: Block, columns: np.ndarray) -> Nodes: ...


def uniform_integers(rng: np.random.Generator, bounds: tuple[int, int], count: int) -> np.ndarray:
    """int64 [count] uniform in lo..hi (inclusive), from ``count`` doubles: an exact product,
    so the same integers on every machine."""
    lo, hi = bounds
    span = hi - lo + 1
    return lo + np.minimum((rng.random(count) * span).astype(np.int64), span - 1)


def normals(rng: np.random.Generator, count: int, scale: float = 1.0) -> np.ndarray:
    """float32 [count] N(0, scale²) draws from the quantile table of ``prior_gen.noise_table``,
    indexed by the 16-bit slices of ⌈count / 4⌉ words of ``rng`` (as the portable weights)."""
    words = rng.bit_generator.random_raw(-(-count // 4))
    return scaled_table(1.0)[words.view(np.dtype("<u2"))[:count]] * np.float32(scale)


def parent_sets(rng: np.random.Generator, n_inputs: int, sizes: np.ndarray) -> list[np.ndarray]:
    """For each node, ``sizes[i]`` distinct parents among ``n_inputs`` (at most all of them),
    uniformly without replacement: the order of ``n_inputs`` uniforms, one row per node."""
    keys = rng.random((sizes.shape[0], n_inputs))
    order = np.argsort(keys, axis=1, kind="stable")
    return [order[i, : min(int(k), n_inputs)] for i, k in enumerate(sizes)]
