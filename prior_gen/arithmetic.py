"""The arithmetic of each fast path, for the reference SCM (:mod:`prior_gen.reference`).

Each class makes, one task at a time and in the reference's plain layout, the same float32
operations as the path it stands for, so that the reference gives that path's bytes:

* :class:`NativeArithmetic` (``arithmetic: native``, :mod:`prior_gen.scm`): weights and causes
  by the Box–Muller transform of :mod:`prior_gen.gaussian`, products by numpy (BLAS), φ by the
  numpy kernels of :mod:`prior_gen.activations`; the layer noise by Box–Muller too or, under
  ``noise_sampler: table``, from :mod:`prior_gen.noise_table` laid out [row, node];
* :class:`PortableArithmetic` (``arithmetic: portable``, :mod:`prior_gen.portable`): every
  normal by table lookup, the layer noise laid out [node, row] (the compiled pass's layout),
  products summed term by term in the order of the inner index, φ by the compiled kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prior_gen.activations import apply_activation
from prior_gen.config import SCMConfig
from prior_gen.gaussian import fill_normals
from prior_gen.noise_table import scaled_table, table_noise
from prior_gen.reference import Arithmetic

__all__ = ["NativeArithmetic", "PortableArithmetic", "arithmetic_for"]


def _table_seeded_noise(rng: np.random.Generator, count: int, sigma: float) -> np.ndarray:
    """A layer's table noise: one word of the stream seeds its SplitMix64 sequence."""
    return table_noise(np.uint64(rng.bit_generator.random_raw()), scaled_table(sigma), count)


@dataclass(frozen=True)
class NativeArithmetic:
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


class PortableArithmetic:
    def normals(self, rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
        # the 16-bit slices of the next ⌈count / 4⌉ words, lowest first, index the table
        words = rng.bit_generator.random_raw(-(-count // 4))
        return scaled_table(scale)[words.view(np.dtype("<u2"))[:count]]

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
        from prior_gen import portable

        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        portable.activate(portable.ACTIVATION_CODES[name], x.reshape(-1), out.reshape(-1))
        return out


def arithmetic_for(scm: SCMConfig) -> Arithmetic:
    """The arithmetic of the path that ``prior.scm`` selects."""
    if scm.arithmetic == "portable":
        return PortableArithmetic()
    return NativeArithmetic(scm.noise_sampler)
