"""Product nodes: pairwise interactions, x = a · r(a_p · a_q) + b · a_p + c · a_q.

An MLP expresses a product of two inputs only approximately, through many units; real targets
often hinge on one (price × quantity, dose × weight). p ≠ q are two parents (uniform; p = q
only when the previous block has one node), a, b, c ~ N(0, 1), and with probability ½ the main
effects are dropped (b = c = 0: a pure product, XOR-like in the signs).

r(t) = t / sqrt(mean over the task's rows of t² + 1e-12) rescales the product to unit RMS: a
product of products squares the scale at every block, so without it a few product nodes in a
row overflow float32 and every draw of a deep product SCM would fail. The mean is summed row by
row in float64 (:func:`prior_gen.portable.column_mean_squares`), so it is the same on every CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prior_gen.families.base import Block, normals, parent_sets

__all__ = ["ProductFamily", "ProductNodes", "unit_rms"]


def unit_rms(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` [n] divided by their root mean square over the rows (+1e-12)."""
    from prior_gen.portable import column_mean_squares

    mean_square = column_mean_squares(values.astype(np.float64)[:, None])[0]
    return (values / np.float32(np.sqrt(mean_square + 1e-12))).astype(np.float32)


@dataclass
class ProductNodes:
    pairs: np.ndarray  # int64 [count, 2]
    coefficients: np.ndarray  # float32 [count, 3]: a, b, c

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        out = np.empty((self.pairs.shape[0], inputs.shape[1]), np.float32)
        for node, ((p, q), (a, b, c)) in enumerate(zip(self.pairs, self.coefficients, strict=True)):
            row = out[node]
            np.multiply(unit_rms(inputs[p] * inputs[q]), a, out=row)
            if b != 0 or c != 0:
                row += inputs[p] * b
                row += inputs[q] * c
        return out


class ProductFamily:
    name: ClassVar[str] = "product"

    def draw(self, block: Block, columns: np.ndarray) -> ProductNodes:
        rng = block.rng
        count = columns.shape[0]
        n_inputs = block.inputs.shape[0]
        chosen = parent_sets(rng, n_inputs, np.full(count, 2))
        pairs = np.array([[own[0], own[-1]] for own in chosen], np.int64).reshape(count, 2)
        coefficients = normals(rng, 3 * count).reshape(count, 3)
        pure = rng.random(count) < 0.5
        coefficients[pure, 1:] = 0.0
        return ProductNodes(pairs, coefficients)
