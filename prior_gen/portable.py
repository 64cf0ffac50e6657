"""Float arithmetic whose results do not depend on the CPU (``prior.scm.arithmetic: portable``).

numpy's float32 transcendental functions (tanh, exp, sin, cos, log) have SIMD kernels that
numpy picks at run time (AVX2, AVX-512, baseline), and they differ in the last bits; OpenBLAS
picks its sgemm/dgemv kernels by CPU too, and they sum in different orders. Either changes the
generator's bytes from one CPU model to another (docs/architecture.md §6, "Determinism").

The kernels here use only IEEE-754 operations that every x86-64 and ARM64 CPU rounds the same
way: +, −, ×, ÷, sqrt, floor, conversions between integers and floats. They are compiled by
numba without ``fastmath``, so LLVM may neither reorder a sum nor fuse a multiply and an add
into an FMA; vectorising a loop (SSE, AVX2 or AVX-512, whatever the CPU has) only applies the
same operations to several elements at once, in the same order for each element. So:

* matrix products accumulate in float32, term by term in the order of the inner index;
* tanh, exp, sin, cos and log are our own float64 range reductions and Taylor polynomials
  (no libm call), rounded once to float32 at the end; they are accurate to ≤ 1 float32 ulp
  (tested against numpy's float64 functions), except sin for |x| > 1e5, where the argument is
  first reduced by ``fmod`` against 2π rounded to float64 (exact, but 2π is off by 2.4e-16, so
  the absolute error grows like |x|·4e-17: deterministic, and meaningless far out anyway);
* column sums of the standardization run row by row in float64.

Limits: the guarantee holds for one version of this code; a numba or LLVM version that broke
the IEEE semantics of unflagged float operations would break it (none does). It also assumes
the CPU's default rounding and subnormal modes (no flush-to-zero set by another library in
the process). Only numba compiles these kernels; there is no numpy fallback.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = [
    "ACTIVATION_CODES",
    "activate",
    "box_muller",
    "column_mean_squares",
    "column_means",
    "forward",
    "matmul_t",
]

# activation codes: positions in prior_gen.config.ACTIVATION_NAMES
ACTIVATION_CODES = {
    name: code
    for code, name in enumerate(
        ("tanh", "relu", "gelu", "identity", "sign", "heaviside", "rbf", "sine", "square", "abs")
    )
}


jit = numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=False)
inline = numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=False, inline="always")

# ---- float64 elementary functions (our own: no libm, no SIMD dispatch) -----------------
ln2_hi = 6.93147180369123816490e-01  # ln 2 split so that k·ln2_hi is exact for |k| < 2^20
ln2_lo = 1.90821492927058770002e-10
inv_ln2 = 1.44269504088896338700e00
_E = tuple(1.0 / math.factorial(i) for i in range(14))  # Taylor coefficients of exp
# 2^e, e = -1021 .. 1023, exact powers of two (the exponent of exp's result)
pow2 = np.array([2.0**e for e in range(-1021, 1024)])
pow2_offset = 1021


@inline
def exp64(y):  # y finite, -700 <= y <= 700
    k = math.floor(y * inv_ln2 + 0.5)
    r = (y - k * ln2_hi) - k * ln2_lo  # |r| <= ln2/2
    p = _E[13]
    p = p * r + _E[12]
    p = p * r + _E[11]
    p = p * r + _E[10]
    p = p * r + _E[9]
    p = p * r + _E[8]
    p = p * r + _E[7]
    p = p * r + _E[6]
    p = p * r + _E[5]
    p = p * r + _E[4]
    p = p * r + _E[3]
    p = p * r + _E[2]
    p = p * r + _E[1]
    p = p * r + _E[0]
    return p * pow2[np.int64(k) + pow2_offset]


@inline
def expm1_small(y):  # |y| <= 0.35: exp(y) - 1 without cancellation
    p = _E[13]
    p = p * y + _E[12]
    p = p * y + _E[11]
    p = p * y + _E[10]
    p = p * y + _E[9]
    p = p * y + _E[8]
    p = p * y + _E[7]
    p = p * y + _E[6]
    p = p * y + _E[5]
    p = p * y + _E[4]
    p = p * y + _E[3]
    p = p * y + _E[2]
    p = p * y + _E[1]
    return p * y


_S = tuple((-1.0) ** i / math.factorial(2 * i + 1) for i in range(10))
_C = tuple((-1.0) ** i / math.factorial(2 * i) for i in range(10))


@inline
def sin_small(r):  # |r| <= π/4, Taylor to r^19
    r2 = r * r
    p = _S[9]
    p = p * r2 + _S[8]
    p = p * r2 + _S[7]
    p = p * r2 + _S[6]
    p = p * r2 + _S[5]
    p = p * r2 + _S[4]
    p = p * r2 + _S[3]
    p = p * r2 + _S[2]
    p = p * r2 + _S[1]
    return r + r * r2 * p


@inline
def cos_small(r):  # |r| <= π/4, Taylor to r^18
    r2 = r * r
    p = _C[9]
    p = p * r2 + _C[8]
    p = p * r2 + _C[7]
    p = p * r2 + _C[6]
    p = p * r2 + _C[5]
    p = p * r2 + _C[4]
    p = p * r2 + _C[3]
    p = p * r2 + _C[2]
    p = p * r2 + _C[1]
    return 1.0 + r2 * p


# π/2 in three parts (fdlibm's pio2_1, pio2_2, pio2_2t): k·part exact for |k| < 2^20
pio2_1 = 1.57079632673412561417e00
pio2_2 = 6.07710050630396597660e-11
pio2_3 = 2.02226624879595063154e-21
two_over_pi = 6.36619772367581382433e-01
two_pi = 2.0 * math.pi


@inline
def sin64(x):  # x finite
    if abs(x) > 1e5:
        x = np.fmod(x, two_pi)  # fmod is exact (IEEE remainder of x by two_pi)
    k = math.floor(x * two_over_pi + 0.5)
    r = ((x - k * pio2_1) - k * pio2_2) - k * pio2_3
    quadrant = np.int64(k) & 3
    if quadrant == 0:
        return sin_small(r)
    if quadrant == 1:
        return cos_small(r)
    if quadrant == 2:
        return -sin_small(r)
    return -cos_small(r)


sqrt_half = math.sqrt(0.5)
gelu_p = 0.3275911  # Abramowitz & Stegun 7.1.26, as in prior_gen.activations
a1, a2, a3, a4, a5 = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429


@inline
def tanh32(v):
    x = np.float64(v)
    a = abs(x)
    if a != a:
        return v
    if a > 9.5:  # tanh(9.5) rounds to 1 in float32
        t = 1.0
    elif a < 0.175:
        e = expm1_small(2.0 * a)
        t = e / (e + 2.0)
    else:
        e = exp64(2.0 * a) - 1.0
        t = e / (e + 2.0)
    return np.float32(math.copysign(t, x))


@inline
def exp_neg_square(x):  # exp(-x²) for finite float64 x
    y = x * x
    if y > 700.0:
        return 0.0
    return exp64(-y)


@inline
def rbf32(v):
    x = np.float64(v)
    if x != x:
        return v
    return np.float32(exp_neg_square(x))


@inline
def gelu32(v):
    # x·Φ(x) = 0.5·x + |x|·(0.5 − q),  q = 0.5·poly(t)·exp(−z²), z = |x|/√2
    x = np.float64(v)
    if x != x:
        return v
    a = abs(x)
    z = a * sqrt_half
    t = 1.0 / (1.0 + gelu_p * z)
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    q = 0.5 * poly * exp_neg_square(z)
    return np.float32(0.5 * x + a * (0.5 - q))


@inline
def sine32(v):
    x = np.float64(v)
    if x - x != 0.0:  # inf or nan
        return np.float32(np.nan)
    return np.float32(sin64(x))


@jit
def activate(code, src, dst):
    """dst = φ_code(src) for flat contiguous float32 arrays."""
    n = src.shape[0]
    if code == 0:
        for i in range(n):
            dst[i] = tanh32(src[i])
    elif code == 1:
        for i in range(n):
            v = src[i]
            dst[i] = v if v > 0 else (np.float32(0.0) if v == v else v)
    elif code == 2:
        for i in range(n):
            dst[i] = gelu32(src[i])
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
        for i in range(n):
            dst[i] = rbf32(src[i])
    elif code == 7:
        for i in range(n):
            dst[i] = sine32(src[i])
    elif code == 8:
        for i in range(n):
            dst[i] = src[i] * src[i]
    else:
        for i in range(n):
            dst[i] = abs(src[i])


# ---- matrix product in a fixed order ----------------------------------------------------
@jit
def matmul_t(weights, act, out):
    """out[j, :] = Σ_p weights[p, j] · act[p, :], float32, summed for p = 0, 1, 2, … in turn.

    Layout [features, rows]: the inner loop runs over the rows (long, contiguous), so it
    vectorises without reordering any sum; four terms per pass keep ``out`` in registers.
    """
    k, m = weights.shape
    n = act.shape[1]
    for j in range(m):
        o = out[j]
        w0 = weights[0, j]
        a0 = act[0]
        for i in range(n):
            o[i] = w0 * a0[i]
        p = 1
        while p + 3 < k:
            w0 = weights[p, j]
            w1 = weights[p + 1, j]
            w2 = weights[p + 2, j]
            w3 = weights[p + 3, j]
            a0 = act[p]
            a1 = act[p + 1]
            a2 = act[p + 2]
            a3 = act[p + 3]
            for i in range(n):
                t = o[i] + w0 * a0[i]
                t = t + w1 * a1[i]
                t = t + w2 * a2[i]
                o[i] = t + w3 * a3[i]
            p += 4
        while p < k:
            wp = weights[p, j]
            ap = act[p]
            for i in range(n):
                o[i] = o[i] + wp * ap[i]
            p += 1


# ---- SCM forward pass of one task --------------------------------------------------------
gamma = np.uint64(0x9E3779B97F4A7C15)
mix1 = np.uint64(0xBF58476D1CE4E5B9)
mix2 = np.uint64(0x94D049BB133111EB)


@inline
def add_table_noise(flat, table, seed):  # as prior_gen.noise_table's kernel
    n = flat.shape[0]
    for w in range((n + 3) // 4):
        z = seed + np.uint64(w + 1) * gamma
        z = (z ^ (z >> np.uint64(30))) * mix1
        z = (z ^ (z >> np.uint64(27))) * mix2
        z ^= z >> np.uint64(31)
        for j in range(4):
            i = 4 * w + j
            if i < n:
                flat[i] += table[(z >> np.uint64(16 * j)) & np.uint64(0xFFFF)]


@jit
def forward(causes, w_in, w_hidden, codes, seeds, table, normals, nodes, picked, last):
    """The SCM of one task in layout [node, row].

    causes [k, n]; w_in [k, h]; w_hidden [L, h, h]; codes [L] activation codes; noise per
    block either by the table (``seeds`` [L] non-empty) or from ``normals`` [L, h·n]
    (empty: no noise). ``nodes`` [d + 1] hidden-node indices (block·h + column) copied
    into ``picked`` [d + 1, n] as their block is computed; the last block goes to
    ``last`` [h, n].
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
        elif normals.shape[0] > 0:
            noise = normals[layer]
            for i in range(h * n):
                flat_hidden[i] += noise[i]
        for q in range(nodes.shape[0]):
            node = nodes[q]
            if node // h == layer:
                picked[q, :] = hidden[node % h, :]
    last[:, :] = hidden


# ---- Box–Muller normals ----------------------------------------------------------------
_L = tuple(1.0 / (2 * i + 1) for i in range(12))
sqrt2 = math.sqrt(2.0)
angle_unit = 0.5 * math.pi / (1 << 21)  # θ of one unit of m
mantissa_mask = np.uint64((1 << 52) - 1)
exponent_one = np.uint64(1023 << 52)


@jit
def box_muller(radius_words, angle_words, scale, z_cos, z_sin):
    """The normals of :func:`prior_gen.gaussian.box_muller` (same words, same layout) in
    portable arithmetic: each 32-bit half b of a word gives m = b >> 9 (23 bits);
    r = scale·sqrt(−2 ln(1 − m1/2²³)), θ = 2π·m2/2²³, z = r·cos θ and r·sin θ."""
    radius_bits = radius_words.view(np.uint32)
    angle_bits = angle_words.view(np.uint32)
    count = radius_bits.shape[0]
    # ln(j / 2^23), j = 2^23 − m in [1, 2^23]: j = 2^e · f, f in [1, 2), from its bits
    value = np.empty(count, np.float64)
    for i in range(count):
        value[i] = np.float64(np.uint32(1 << 23) - (radius_bits[i] >> np.uint32(9)))
    bits = value.view(np.uint64)
    exponent = np.empty(count, np.int64)
    for i in range(count):
        exponent[i] = np.int64(bits[i] >> np.uint64(52)) - 1023 - 23
        bits[i] = (bits[i] & mantissa_mask) | exponent_one
    for i in range(count):
        f = value[i]
        e = np.float64(exponent[i])
        if f > sqrt2:
            f = 0.5 * f
            e = e + 1.0
        t = (f - 1.0) / (f + 1.0)
        t2 = t * t
        p = _L[11]
        p = p * t2 + _L[10]
        p = p * t2 + _L[9]
        p = p * t2 + _L[8]
        p = p * t2 + _L[7]
        p = p * t2 + _L[6]
        p = p * t2 + _L[5]
        p = p * t2 + _L[4]
        p = p * t2 + _L[3]
        p = p * t2 + _L[2]
        p = p * t2 + _L[1]
        log_f = 2.0 * (t + t * t2 * p)
        log_u = e * ln2_hi + (e * ln2_lo + log_f)
        radius = scale * math.sqrt(-2.0 * log_u)
        # θ = 2π·m/2^23: quadrant q = round(m / 2^21), remainder exact in integers
        m = np.int64(angle_bits[i] >> np.uint32(9))
        quadrant = (m + (1 << 20)) >> 21
        phi = np.float64(m - (quadrant << 21)) * angle_unit
        sin_phi = sin_small(phi)
        cos_phi = cos_small(phi)
        quadrant &= 3
        if quadrant == 0:
            sine, cosine = sin_phi, cos_phi
        elif quadrant == 1:
            sine, cosine = cos_phi, -sin_phi
        elif quadrant == 2:
            sine, cosine = -sin_phi, -cos_phi
        else:
            sine, cosine = -cos_phi, sin_phi
        z_cos[i] = np.float32(radius * cosine)
        z_sin[i] = np.float32(radius * sine)


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


@jit
def column_mean_squares(values):
    """Float64 means of the squares of the columns of ``values`` [n, d], rows in order."""
    n, d = values.shape
    total = np.zeros(d, np.float64)
    for i in range(n):
        for j in range(d):
            total[j] += values[i, j] * values[i, j]
    for j in range(d):
        total[j] /= n
    return total
