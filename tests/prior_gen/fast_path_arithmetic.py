"""The arithmetic of each fast path of the generator, for the reference SCM
(``prior_gen.paper.reference``): with it, the reference gives that path's bytes.

Each class makes, one task at a time and in the reference's plain layout, the same float32
operations as the path it stands for:

* :class:`NativeArithmetic` (``arithmetic: native``, ``prior_gen.engine.forward.forward_group``):
  weights and causes by the Box–Muller transform of ``prior_gen.engine.gaussian``, products by
  numpy (BLAS), φ by the numpy kernels of ``prior_gen.engine.activations``; the layer noise by
  Box–Muller too or, under ``noise_sampler: table``, from ``prior_gen.engine.noise_table``,
  laid out [row, node];
* :class:`PortableArithmetic` (``arithmetic: portable``, ``forward_portable``): every normal by
  table lookup, the layer noise laid out [node, row] (the compiled pass's layout), products
  summed term by term in the order of the inner index, φ by the compiled kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prior_gen.config import SCMConfig
from prior_gen.engine.activations import apply_activation
from prior_gen.engine.gaussian import fill_normals
from prior_gen.engine.noise_table import scaled_table, table_noise, table_normals
from prior_gen.paper.reference import Arithmetic

__all__ = ["NativeArithmetic", "PortableArithmetic", "arithmetic_for"]


def _table_seeded_noise(rng: np.random.Generator, count: int, sigma: float) -> np.ndarray:
    """A layer's table noise: one word of the stream seeds its SplitMix64 sequence."""
    return table_noise(np.uint64(rng.bit_generator.random_raw()), scaled_table(sigma), count)


@dataclass(frozen=True)
class NativeArithmetic(Arithmetic):
    noise_sampler: str = "box_muller"  # or "table"

    def normals(self, rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
        out = np.empty(count, np.float32)
        fill_normals(rng.bit_generator, out, scale)
        return out

    def layer_noise(self, rng: np.random.Generator, n_rows: int, width: int,
                    sigma: float) -> np.ndarray:
        if self.noise_sampler == "table":
            return _table_seeded_noise(rng, n_rows * width, sigma).reshape(n_rows, width)
        return self.normals(rng, n_rows * width, sigma).reshape(n_rows, width)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.matmul(a, b)

    def activation(self, name: str, x: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        apply_activation(name, x, out)
        return out


class PortableArithmetic(Arithmetic):
    def normals(self, rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
        return table_normals(rng.bit_generator, scaled_table(scale), count)

    def layer_noise(self, rng: np.random.Generator, n_rows: int, width: int,
                    sigma: float) -> np.ndarray:
        return _table_seeded_noise(rng, n_rows * width, sigma).reshape(width, n_rows).T

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # Σ_p a[:, p]·b[p], each product and each partial sum rounded to float32, p in order
        columns = b.reshape(b.shape[0], -1)
        out = a[:, :1] * columns[:1]
        for p in range(1, columns.shape[0]):
            out = out + a[:, p : p + 1] * columns[p : p + 1]
        return out.reshape(a.shape[0], *b.shape[1:])

    def activation(self, name: str, x: np.ndarray) -> np.ndarray:
        from prior_gen.engine import portable

        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        portable.activate(portable.ACTIVATION_CODES[name], x.reshape(-1), out.reshape(-1))
        return out


def arithmetic_for(scm: SCMConfig) -> Arithmetic:
    """The arithmetic of the path that ``prior.scm`` selects."""
    if scm.arithmetic == "portable":
        return PortableArithmetic()
    return NativeArithmetic(scm.noise_sampler)
