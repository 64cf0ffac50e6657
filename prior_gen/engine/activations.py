"""The ten activation functions of paper §2.1, as float32 numpy kernels ``dst = φ(src)``.

They run on the stacked hidden states of all tasks of a step at once, so each is a handful of
whole-array ufunc passes. Definitions follow the paper: sign ∈ {-1, 0, 1}, Heaviside
1[x > 0], RBF exp(-x²). GELU is the exact x·Φ(x); Φ comes from the Abramowitz & Stegun
7.1.26 approximation of erf (absolute error ≤ 1.5e-7, float32 resolution), since numpy has
no erf and scipy's is ~20× slower.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["ACTIVATIONS", "apply_activation"]

_F = np.float32
# Abramowitz & Stegun 7.1.26
_P = _F(0.3275911)
_A = tuple(_F(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_INV_SQRT2 = _F(1.0 / np.sqrt(2.0))


def _gelu(src: np.ndarray, dst: np.ndarray) -> None:
    # x·Φ(x) = 0.5·x + |x|·(0.5 − q),  q = 0.5·(1 − erf(|x|/√2)) = 0.5·poly(t)·exp(−z²)
    z = np.abs(src)
    np.multiply(z, _INV_SQRT2, out=z)
    t = np.multiply(z, _P)
    np.add(t, _F(1.0), out=t)
    np.reciprocal(t, out=t)
    poly = np.multiply(t, _A[4])
    for coefficient in (_A[3], _A[2], _A[1], _A[0]):
        np.add(poly, coefficient, out=poly)
        np.multiply(poly, t, out=poly)
    np.multiply(z, z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    np.multiply(poly, z, out=poly)  # 1 − erf(|x|/√2)
    np.multiply(poly, _F(-0.5), out=poly)
    np.add(poly, _F(0.5), out=poly)  # 0.5 − q
    np.abs(src, out=z)
    np.multiply(z, poly, out=z)
    np.multiply(src, _F(0.5), out=dst)
    np.add(dst, z, out=dst)


def _rbf(src: np.ndarray, dst: np.ndarray) -> None:
    np.multiply(src, src, out=dst)
    np.negative(dst, out=dst)
    np.exp(dst, out=dst)


ACTIVATIONS: dict[str, Callable[[np.ndarray, np.ndarray], object]] = {
    "tanh": lambda src, dst: np.tanh(src, out=dst),
    "relu": lambda src, dst: np.maximum(src, _F(0.0), out=dst),
    "gelu": _gelu,
    "identity": lambda src, dst: np.copyto(dst, src),
    "sign": lambda src, dst: np.sign(src, out=dst),
    "heaviside": lambda src, dst: np.copyto(dst, np.greater(src, _F(0.0))),
    "rbf": _rbf,
    "sine": lambda src, dst: np.sin(src, out=dst),
    "square": lambda src, dst: np.multiply(src, src, out=dst),
    "abs": lambda src, dst: np.abs(src, out=dst),
}


def apply_activation(name: str, src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[...] = φ_name(src)`` for float32 arrays of equal shape."""
    ACTIVATIONS[name](src, dst)
