"""Float arithmetic whose results do not depend on the CPU (``prior.scm.arithmetic: portable``).

numpy's float32 transcendental functions (tanh, exp, sin, ...) have SIMD kernels that
numpy picks at run time (AVX2, AVX-512, baseline), and they differ in the last bits; OpenBLAS
picks its sgemm/dgemv kernels by CPU too, and they sum in different orders. Either changes the
generator's bytes from one CPU model to another (docs/architecture.md §6, "Determinism").

The kernels here use only IEEE-754 operations that every x86-64 and ARM64 CPU rounds the same
way: +, −, ×, ÷, sqrt, floor, conversions between integers and floats. They are compiled by
numba without ``fastmath``, so LLVM may neither reorder a sum nor fuse a multiply and an add
into an FMA; vectorising a loop (SSE, AVX2 or AVX-512, whatever the CPU has) only applies the
same operations to several elements at once, in the same order for each element. So:

* matrix products accumulate in float32, term by term in the order of the inner index;
* tanh, exp (for RBF and GELU) and sin are our own float64 range reductions and Taylor
  polynomials (no libm call), rounded once to float32 at the end; they are within 1 float32
  ulp of the exact functions (tested), except sin for |x| > 1e5, where the argument is first
  reduced by ``fmod`` against 2π rounded to float64 (fmod is exact in every C library, but 2π
  is off by 2.4e-16, so the absolute error grows like |x|·4e-17: deterministic, and
  meaningless that far out anyway);
* column sums of the standardization run row by row in float64.

The limits of the guarantee (a numba or LLVM release, rounding modes) are in
docs/architecture.md §6, "Determinism across machines".
"""

from __future__ import annotations

import math

import numba
import numpy as np

from prior_gen.config import ACTIVATION_NAMES
from prior_gen.engine.noise_table import GAMMA, MIX1, MIX2

__all__ = [
    "ACTIVATION_CODES",
    "activate",
    "column_means",
    "forward",
    "matmul_t",
]

# the code of an activation is its position in the bank; activate() dispatches on it
ACTIVATION_CODES = {name: code for code, name in enumerate(ACTIVATION_NAMES)}


# fastmath=False: no reordering, no FMA contraction. error_model="numpy": a float division
# by zero gives inf/nan as IEEE says instead of a Python exception (whose check would also
# keep the loops from vectorising).
_OPTIONS = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")
jit = numba.njit(**_OPTIONS)
inline = numba.njit(**_OPTIONS, inline="always")

# ---- float64 elementary functions (our own: no libm call, no SIMD dispatch) -------------
# The hot loops below are branch-free (selects only) and convert no 64-bit integer to or from
# float64 (AVX2 has no instruction for it), so that LLVM vectorises them; the kernels work on
# blocks of BLOCK values, small enough for their float64 scratch arrays to stay in L1.
BLOCK = 512
LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts: k·LN2_HI is exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e00
# y + ROUND rounds y to an integer k (|k| < 2^51) held in the low bits of the sum
ROUND = 6755399441055744.0  # 1.5 · 2^52
_E = tuple(1.0 / math.factorial(i) for i in range(8))  # Taylor coefficients of exp
_S = tuple((-1.0) ** i / math.factorial(2 * i + 1) for i in range(5))  # of sin
_C = tuple((-1.0) ** i / math.factorial(2 * i) for i in range(6))  # of cos
EXP_ARGUMENT_MIN = -110.0  # exp(-110) = 1.7e-48 rounds to 0 in float32
TANH_ARGUMENT_MAX = 9.5  # tanh(9.5) rounds to 1 in float32
SIN_ARGUMENT_MAX = 1e5  # beyond: reduced by fmod first (see the module docstring)
SQRT_HALF = math.sqrt(0.5)
# π/2 in three parts (fdlibm's pio2_1, pio2_2, pio2_2t): k·part exact for |k| < 2^20
PIO2_1 = 1.57079632673412561417e00
PIO2_2 = 6.07710050630396597660e-11
PIO2_3 = 2.02226624879595063154e-21
TWO_OVER_PI = 6.36619772367581382433e-01
TWO_PI = 2.0 * math.pi
# GELU's Φ by Abramowitz & Stegun 7.1.26, as in prior_gen.engine.activations
GELU_P = 0.3275911
GELU_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@inline
def exp_reduced(y):
    """(exp(r), k + ROUND) with exp(y) = exp(r)·2^k, |r| <= ln2/2; y in [-1000, 1000].
    Taylor to r^7: relative error < 7e-9, a tenth of float32's 6e-8."""
    t = y * INV_LN2 + ROUND
    k = t - ROUND
    r = (y - k * LN2_HI) - k * LN2_LO
    p = _E[7]
    p = p * r + _E[6]
    p = p * r + _E[5]
    p = p * r + _E[4]
    p = p * r + _E[3]
    p = p * r + _E[2]
    p = p * r + _E[1]
    p = p * r + _E[0]
    return p, t


@inline
def powers_of_two(rounded_bits, out_bits, m):
    """out[i] = 2^k[i] from the bits of k[i] + ROUND (both float64 arrays seen as uint64):
    the low 12 bits of k + 1023 become the exponent field."""
    for i in range(m):
        out_bits[i] = (rounded_bits[i] + np.uint64(1023)) << np.uint64(52)


@inline
def sin_cos_small(r):
    """(sin r, cos r) for |r| <= π/4 (Taylor to r^9 and r^10: error < 2e-9)."""
    r2 = r * r
    s = _S[4]
    s = s * r2 + _S[3]
    s = s * r2 + _S[2]
    s = s * r2 + _S[1]
    c = _C[5]
    c = c * r2 + _C[4]
    c = c * r2 + _C[3]
    c = c * r2 + _C[2]
    c = c * r2 + _C[1]
    return r + r * r2 * s, 1.0 + r2 * c


@inline
def sin_reduced(x):
    """sin x for |x| <= SIN_ARGUMENT_MAX (Cody–Waite reduction by π/2, exact there)."""
    t = x * TWO_OVER_PI + ROUND
    k = t - ROUND
    r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
    quadrant = k - 4.0 * math.floor(k * 0.25)  # k mod 4, exact
    s, c = sin_cos_small(r)
    if quadrant == 0.0:
        return s
    if quadrant == 1.0:
        return c
    if quadrant == 2.0:
        return -s
    return -c


@jit
def _tanh(src, dst):
    n = src.shape[0]
    mantissa = np.empty(BLOCK, np.float64)
    rounded = np.empty(BLOCK, np.float64)
    scale = np.empty(BLOCK, np.float64)
    rounded_bits = rounded.view(np.uint64)
    scale_bits = scale.view(np.uint64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        for i in range(m):
            a = min(abs(np.float64(src[start + i])), TANH_ARGUMENT_MAX)  # nan -> the bound
            mantissa[i], rounded[i] = exp_reduced(2.0 * a)
        powers_of_two(rounded_bits, scale_bits, m)
        for i in range(m):
            x = np.float64(src[start + i])
            a = min(abs(x), TANH_ARGUMENT_MAX)
            e = mantissa[i] * scale[i] - 1.0  # exp(2a) − 1: no cancellation for a >= 1e-4
            t = e / (e + 2.0)
            t = a - a * a * a * (1.0 / 3.0) if a < 1e-4 else t
            t = math.copysign(t, x)
            dst[start + i] = np.float32(x if x != x else t)


@jit
def _rbf(src, dst):
    n = src.shape[0]
    mantissa = np.empty(BLOCK, np.float64)
    rounded = np.empty(BLOCK, np.float64)
    scale = np.empty(BLOCK, np.float64)
    rounded_bits = rounded.view(np.uint64)
    scale_bits = scale.view(np.uint64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        for i in range(m):
            x = np.float64(src[start + i])
            y = max(-(x * x), EXP_ARGUMENT_MIN)  # nan -> the bound
            mantissa[i], rounded[i] = exp_reduced(y)
        powers_of_two(rounded_bits, scale_bits, m)
        for i in range(m):
            x = np.float64(src[start + i])
            value = mantissa[i] * scale[i]
            value = 0.0 if x * x > -EXP_ARGUMENT_MIN else value
            dst[start + i] = np.float32(x if x != x else value)


@jit
def _gelu(src, dst):
    # x·Φ(x) = 0.5·x + |x|·(0.5 − q),  q = 0.5·poly(t)·exp(−z²),  z = |x|/√2
    n = src.shape[0]
    mantissa = np.empty(BLOCK, np.float64)
    rounded = np.empty(BLOCK, np.float64)
    scale = np.empty(BLOCK, np.float64)
    rounded_bits = rounded.view(np.uint64)
    scale_bits = scale.view(np.uint64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        for i in range(m):
            z = abs(np.float64(src[start + i])) * SQRT_HALF
            y = max(-(z * z), EXP_ARGUMENT_MIN)  # nan -> the bound
            mantissa[i], rounded[i] = exp_reduced(y)
        powers_of_two(rounded_bits, scale_bits, m)
        for i in range(m):
            x = np.float64(src[start + i])
            a = abs(x)
            z = a * SQRT_HALF
            gauss = mantissa[i] * scale[i]
            gauss = 0.0 if z * z > -EXP_ARGUMENT_MIN else gauss
            t = 1.0 / (1.0 + GELU_P * z)
            poly = GELU_A[4]
            poly = poly * t + GELU_A[3]
            poly = poly * t + GELU_A[2]
            poly = poly * t + GELU_A[1]
            poly = poly * t + GELU_A[0]
            q = 0.5 * (poly * t) * gauss
            dst[start + i] = np.float32(0.5 * x + a * (0.5 - q))


@jit
def _sine(src, dst):
    n = src.shape[0]
    far = 0
    for i in range(n):
        x = np.float64(src[i])
        near = abs(x) <= SIN_ARGUMENT_MAX
        far += 0 if near else 1
        dst[i] = np.float32(sin_reduced(x if near else 0.0))
    if far:  # rare: |x| > 1e5, inf or nan
        for i in range(n):
            x = np.float64(src[i])
            if not abs(x) <= SIN_ARGUMENT_MAX:
                finite = x - x == 0.0
                dst[i] = np.float32(sin_reduced(np.fmod(x, TWO_PI)) if finite else np.nan)


@jit
def activate(code, src, dst):
    """dst = φ_code(src) for flat contiguous float32 arrays (codes: ACTIVATION_CODES)."""
    n = src.shape[0]
    if code == 0:
        _tanh(src, dst)
    elif code == 1:
        for i in range(n):
            v = src[i]
            dst[i] = v if v > 0 else (np.float32(0.0) if v == v else v)
    elif code == 2:
        _gelu(src, dst)
    elif code == 3:
        for i in range(n):
            dst[i] = src[i]
    elif code == 4:
        for i in range(n):
            v = src[i]
            dst[i] = np.float32(1.0) if v > 0 else (np.float32(-1.0) if v < 0 else v * 0)
    elif code == 5:
        for i in range(n):
            dst[i] = np.float32(1.0) if src[i] > 0 else np.float32(0.0)
    elif code == 6:
        _rbf(src, dst)
    elif code == 7:
        _sine(src, dst)
    elif code == 8:
        for i in range(n):
            dst[i] = src[i] * src[i]
    else:
        for i in range(n):
            dst[i] = abs(src[i])


@jit
def matmul_t(weights, act, out):
    """out[j, :] = Σ_p weights[p, j] · act[p, :], float32, summed for p = 0, 1, 2, … in turn.

    Layout [features, rows]: the inner loop runs over the rows (long, contiguous), so it
    vectorises without reordering any sum. Two outputs and four terms per pass share the loads
    of ``act`` (1.2–1.3× faster than one output per pass; the same sums, so the same bytes).
    """
    k, m = weights.shape
    n = act.shape[1]
    j = 0
    while j + 1 < m:
        o = out[j]
        q = out[j + 1]
        w0 = weights[0, j]
        v0 = weights[0, j + 1]
        a0 = act[0]
        for i in range(n):
            o[i] = w0 * a0[i]
            q[i] = v0 * a0[i]
        p = 1
        while p + 3 < k:
            w0, w1, w2, w3 = weights[p, j], weights[p + 1, j], weights[p + 2, j], weights[p + 3, j]
            v0, v1 = weights[p, j + 1], weights[p + 1, j + 1]
            v2, v3 = weights[p + 2, j + 1], weights[p + 3, j + 1]
            a0, a1, a2, a3 = act[p], act[p + 1], act[p + 2], act[p + 3]
            for i in range(n):
                x0, x1, x2, x3 = a0[i], a1[i], a2[i], a3[i]
                t = o[i] + w0 * x0
                u = q[i] + v0 * x0
                t = t + w1 * x1
                u = u + v1 * x1
                t = t + w2 * x2
                u = u + v2 * x2
                o[i] = t + w3 * x3
                q[i] = u + v3 * x3
            p += 4
        while p < k:
            wp = weights[p, j]
            vp = weights[p, j + 1]
            ap = act[p]
            for i in range(n):
                o[i] = o[i] + wp * ap[i]
                q[i] = q[i] + vp * ap[i]
            p += 1
        j += 2
    if j < m:  # the last output of an odd count
        o = out[j]
        w0 = weights[0, j]
        a0 = act[0]
        for i in range(n):
            o[i] = w0 * a0[i]
        for p in range(1, k):
            wp = weights[p, j]
            ap = act[p]
            for i in range(n):
                o[i] = o[i] + wp * ap[i]


# ---- SCM forward pass of one task --------------------------------------------------------
@jit
def add_table_noise(flat, table, seed):
    """flat += the SplitMix64 table noise seeded by ``seed`` (prior_gen.engine.noise_table)."""
    n = flat.shape[0]
    for w in range((n + 3) // 4):
        z = seed + np.uint64(w + 1) * GAMMA
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
        z ^= z >> np.uint64(31)
        for j in range(4):
            i = 4 * w + j
            if i < n:
                flat[i] += table[(z >> np.uint64(16 * j)) & np.uint64(0xFFFF)]


@jit
def forward(causes, w_in, w_hidden, codes, seeds, table, nodes, picked, last):
    """The SCM of one task in layout [node, row].

    causes [k, n]; w_in [k, h]; w_hidden [L, h, h]; codes [L] activation codes; each block's
    noise is the SplitMix64 table noise of prior_gen.engine.noise_table seeded by ``seeds[block]``,
    added to the block's values in [node, row] order (``seeds`` empty: no noise). ``nodes``
    [d + 1] hidden-node indices (block·h + column) are copied into ``picked`` [d + 1, n] as
    their block is computed; the last block goes to ``last`` [h, n].
    """
    depth = codes.shape[0]
    h, n = last.shape
    hidden = np.empty((h, n), np.float32)
    act = np.empty((h, n), np.float32)
    matmul_t(w_in, causes, hidden)
    flat_hidden = hidden.reshape(-1)
    flat_act = act.reshape(-1)
    for layer in range(depth):
        activate(codes[layer], flat_hidden, flat_act)
        matmul_t(w_hidden[layer], act, hidden)
        if seeds.shape[0] > 0:
            add_table_noise(flat_hidden, table, seeds[layer])
        for q in range(nodes.shape[0]):
            node = nodes[q]
            if node // h == layer:
                picked[q, :] = hidden[node % h, :]
    last[:, :] = hidden


# ---- standardization -------------------------------------------------------------------
@jit
def column_means(values):
    """Float64 means of the columns of float64 ``values`` [n, d], rows summed in order."""
    n, d = values.shape
    total = np.zeros(d, np.float64)
    for i in range(n):
        for j in range(d):
            total[j] += values[i, j]
    for j in range(d):
        total[j] /= n
    return total
