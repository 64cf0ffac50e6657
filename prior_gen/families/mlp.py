"""The paper's MLP node (§2.1): x_j = Σ_p W[p, j] · φ_l(a_p), over every node of the block.

Its weights are the block's columns of W_l, drawn from the task's main stream as the paper's
SCM draws them, so a task whose nodes are all MLP nodes has the bytes of ``arithmetic:
portable`` without families (tested). The product is :func:`prior_gen.portable.matmul_t`,
which sums each output for p = 0, 1, 2, … whatever the subset of columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prior_gen.families.base import Block

__all__ = ["MLPFamily", "MLPNodes"]


@dataclass
class MLPNodes:
    weights: np.ndarray  # float32 [h_in, count]
    code: int  # the activation's code (prior_gen.portable.ACTIVATION_CODES)

    def evaluate(self, inputs: np.ndarray) -> np.ndarray:
        from prior_gen import portable

        activated = np.empty_like(inputs)
        portable.activate(self.code, inputs.reshape(-1), activated.reshape(-1))
        out = np.empty((self.weights.shape[1], inputs.shape[1]), np.float32)
        portable.matmul_t(self.weights, activated, out)
        return out


class MLPFamily:
    name: ClassVar[str] = "mlp"

    def draw(self, block: Block, columns: np.ndarray) -> MLPNodes:
        from prior_gen.portable import ACTIVATION_CODES

        weights = np.ascontiguousarray(block.weights[:, columns])
        return MLPNodes(weights=weights, code=ACTIVATION_CODES[block.activation])
