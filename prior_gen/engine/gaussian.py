"""Fast float32 standard normals by the Box–Muller transform (Box & Muller, 1958).

Most of the generator's random numbers are the per-layer Gaussian noise of §2.2 (n·h per
hidden block). numpy's ``Generator.standard_normal`` draws them one at a time; transforming
whole arrays of raw 64-bit draws with vectorised float32 ufuncs is ~3× faster on our machine
(speed/bench_prior_gen.py). A 64-bit word holds two 32-bit uniforms; each becomes a
23-bit uniform f in [1, 2) by writing its top bits into a float32 mantissa. With u1 from one
array of words and u2 from a second array,

    r = sqrt(-2 ln(2 - f1)),   z_cos = r cos(2π f2),   z_sin = r sin(2π f2)

(2 − f1 lies in (0, 1], so the logarithm is finite; 2π f2 differs from 2π u2 by a whole turn).
``count`` normals take ``words_needed(count)`` words for each array; they are laid out as all
cosine values, then the sine values, so a task's normals depend only on its own stream, never
on what other tasks are transformed in the same call. 23-bit uniforms bound |z| by
sqrt(46 ln 2) ≈ 5.65 (a normal exceeds that with probability 1.6e-8).
"""

from __future__ import annotations

import numpy as np

__all__ = ["box_muller", "draw_words", "fill_normals", "place_normals", "words_needed"]

_EXPONENT_ONE = np.uint32(0x3F800000)  # float32 1.0: mantissa bits below give [1, 2)
_MANTISSA_SHIFT = np.uint32(9)
_TWO_PI = np.float32(2.0 * np.pi)


def words_needed(count: int) -> int:
    """Raw 64-bit words needed in each of the two word arrays for ``count`` normals."""
    return (count + 3) // 4


def draw_words(bit_generator: np.random.BitGenerator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The two word arrays (radius words, then angle words) for ``count`` normals."""
    words = words_needed(count)
    return bit_generator.random_raw(words), bit_generator.random_raw(words)


def box_muller(
    radius_words: np.ndarray, angle_words: np.ndarray, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(z_cos, z_sin)``, float32 of ``2·len(words)`` each, times ``scale``. Consumes the words."""
    radius_bits = radius_words.view(np.uint32)
    angle_bits = angle_words.view(np.uint32)
    for bits in (radius_bits, angle_bits):
        np.right_shift(bits, _MANTISSA_SHIFT, out=bits)
        np.bitwise_or(bits, _EXPONENT_ONE, out=bits)
    radius = radius_bits.view(np.float32)
    angle = angle_bits.view(np.float32)
    np.subtract(np.float32(2.0), radius, out=radius)
    np.log(radius, out=radius)
    np.multiply(radius, np.float32(-2.0 * scale * scale), out=radius)
    np.sqrt(radius, out=radius)
    np.multiply(angle, _TWO_PI, out=angle)
    z_cos = np.cos(angle)
    np.multiply(z_cos, radius, out=z_cos)
    np.sin(angle, out=angle)
    np.multiply(angle, radius, out=angle)
    return z_cos, angle


def place_normals(
    z_cos: np.ndarray, z_sin: np.ndarray, start: int, count: int, out: np.ndarray, add: bool
) -> int:
    """Write (or add) one block's ``count`` normals, starting at ``start`` of the transformed
    arrays, into flat ``out``; return the start of the next block."""
    half = 2 * words_needed(count)
    first = min(half, count)
    if add:
        out[:first] += z_cos[start : start + first]
        out[first:] += z_sin[start : start + count - first]
    else:
        out[:first] = z_cos[start : start + first]
        out[first:] = z_sin[start : start + count - first]
    return start + half


def fill_normals(
    bit_generator: np.random.BitGenerator, out: np.ndarray, scale: float = 1.0
) -> None:
    """Fill contiguous float32 ``out`` with N(0, scale²) draws from ``bit_generator``."""
    flat = out.reshape(-1)
    count = flat.shape[0]
    if count == 0:
        return
    z_cos, z_sin = box_muller(*draw_words(bit_generator, count), scale)
    place_normals(z_cos, z_sin, 0, count, flat, add=False)
