"""Per-layer SCM noise from an inverse-CDF lookup table (``prior.scm.noise_sampler: table``).

The per-layer Gaussian noise of §2.2 is most of the generator's random numbers (n·h per
hidden block and task) and, drawn with the Box–Muller transform
(:mod:`prior_gen.engine.gaussian`), about half of the generation time. This sampler
replaces, for the noise only:

* the transform: each draw is one of ``TABLE_SIZE`` equally likely values, the standard-normal
  quantiles at the bin midpoints, q_i = Φ⁻¹((i + ½) / 65536), rescaled so that the table's
  variance is exactly 1 (0.99998 before); a 16-bit index picks one;
* the random words: the noise of one hidden block of one task is the SplitMix64 sequence
  (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) started
  at one 64-bit word drawn from the task's stream; each output word gives four indices (its
  16-bit slices, lowest first). Word c (c = 1, 2, …) is the SplitMix64 finaliser of
  seed + c·γ, so words are independent of each other's computation and the kernel vectorises.

The compiled kernel :func:`prior_gen.engine.portable.add_table_noise` (numba; one pass: words,
lookup, add) gives the bytes of the numpy reference :func:`table_noise` (integer arithmetic, an
exact lookup, one float32 addition per value; tested). It is ~2.4× faster than numpy's raw
words + ``np.take`` + add, and ~4× faster than the Box–Muller (docs/performance.md).

What it costs in distribution (tested in tests/prior_gen/test_noise_table.py): the draws are a
discretised normal with exact mean 0 (the table is symmetric) and variance 1, kurtosis 2.9992
instead of 3, and |z| ≤ 4.325 (a normal exceeds that with probability 1.5e-5); neighbouring
values are ≤ 6.4e-5 apart within ±1σ. For noise of std 0.005–0.02 added to hidden values
of order 1, none of this is visible in the tasks.

The table is computed once per process (15 ms) in float64 by the standard library's
``statistics.NormalDist().inv_cdf`` (Wichura's AS241, relative error ~1e-16) and rounded to
float32 (``scipy.special.ndtri`` gives the same float32 table); its sha256 is pinned by a test.
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist

import numpy as np

__all__ = [
    "TABLE_BITS",
    "TABLE_SIZE",
    "normal_table",
    "scaled_table",
    "splitmix_words",
    "table_noise",
    "table_normals",
]

TABLE_BITS = 16
TABLE_SIZE = 1 << TABLE_BITS
_DRAWS_PER_WORD = 64 // TABLE_BITS
# SplitMix64: Weyl increment (golden ratio) and the finaliser's multipliers (Stafford's Mix13)
GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


@lru_cache(maxsize=1)
def normal_table() -> np.ndarray:
    """The float32 table of ``TABLE_SIZE`` standard-normal values (read-only)."""
    quantile = NormalDist().inv_cdf
    half = TABLE_SIZE // 2
    # upper half from its own quantiles, lower half its mirror image: exact symmetry
    upper = np.array([quantile((i + 0.5) / TABLE_SIZE) for i in range(half, TABLE_SIZE)])
    upper /= np.sqrt(np.mean(upper * upper))  # variance 1 (the mean is 0 by symmetry)
    table = np.concatenate([-upper[::-1], upper]).astype(np.float32)
    table.flags.writeable = False
    return table


@lru_cache(maxsize=16)
def scaled_table(scale: float) -> np.ndarray:
    """``normal_table() * scale`` in float32 (read-only): N(0, scale²) draws by lookup."""
    table = normal_table() * np.float32(scale)
    table.flags.writeable = False
    return table


def splitmix_words(seed: int | np.uint64, count: int) -> np.ndarray:
    """The first ``count`` SplitMix64 outputs after ``seed`` (uint64; numpy reference)."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps modulo 2**64, as intended
        z = np.arange(1, count + 1, dtype=np.uint64)
        z *= GAMMA
        z += np.uint64(seed)
        z ^= z >> np.uint64(30)
        z *= MIX1
        z ^= z >> np.uint64(27)
        z *= MIX2
        z ^= z >> np.uint64(31)
    return z


def table_noise(seed: int | np.uint64, table: np.ndarray, count: int) -> np.ndarray:
    """``count`` noise values: ``table`` at the 16-bit slices of the words after ``seed``."""
    words = splitmix_words(seed, -(-count // _DRAWS_PER_WORD))
    return np.take(table, words.view(np.uint16)[:count], mode="clip")


def table_normals(bit_generator: np.random.BitGenerator, table: np.ndarray,
                  count: int) -> np.ndarray:
    """``count`` draws from ``table`` (float32), indexed by the 16-bit slices of the next
    ⌈count / 4⌉ words of ``bit_generator``, lowest slice first (the portable arithmetic's
    normals: weights and causes)."""
    words = bit_generator.random_raw(-(-count // _DRAWS_PER_WORD))
    return table[words.view(np.dtype("<u2"))[:count]]  # little-endian: the lowest slice first
