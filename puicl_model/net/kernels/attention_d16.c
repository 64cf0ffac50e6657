// Unmasked multi-head self-attention with head dimension 16, float32, on CPU: forward pass
// (output and log-sum-exp of the scores) and backward pass.
//
// Used by puicl_model.cpu_attention for the row attention of training (paper §3), where every
// row of a column attends to every row. The forward pass keeps 32 queries in the vector lanes
// and runs an online softmax over chunks of keys. The backward pass follows FlashAttention-2
// (Dao, 2023): for each block of 32 keys and 32 queries it recomputes the probabilities
// P = exp(S - lse), then dS = P * (dP - D) with D = rowsum(dO * O), and accumulates
// dQ = dS K * scale, dK = dS^T Q * scale and dV = P^T dO.
//
// Why a kernel of our own: with 16 dimensions per head every product is narrow, and what
// limits a CPU is loading the broadcast operand of each fused multiply-add. The products here
// are register-blocked like a matrix-multiply micro-kernel (8 rows x 2 vectors of
// accumulators), so that 10 loads feed 16 FMAs; docs/performance.md has the measurements.
// Written with GCC/Clang vector extensions rather than intrinsics: the same source compiles
// for AVX-512 and for AVX2 (both checked against PyTorch).
//
// Determinism: each (column, head) pair is computed by one thread in a fixed order, so the
// result does not depend on the number of threads.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DH 16
#define IB 32 /* queries per block */
#define JB 32 /* keys per block (2 vectors) */
_Static_assert(IB == 32 && JB == 32, "the block helpers assume rows of two 16-float vectors");
#define KC 128 /* keys per chunk of the forward's online softmax (a multiple of JB) */

typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));

static inline v16 load_u(const float *p) { return *(const v16u *)p; }
static inline void store_u(float *p, v16 v) { *(v16u *)p = v; }
static inline float hsum(v16 v) {
    float s = 0;
    for (int l = 0; l < 16; l++) s += v[l];
    return s;
}
static inline v16 vmax(v16 a, v16 b) {
    v16i m = a > b;
    return (v16)(((v16i)a & m) | ((v16i)b & ~m));
}
static inline v16 bcast(float x) { return (v16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }

// exp(t) for t <= 0, clamped below at -87: Cody-Waite range reduction and the degree-6
// polynomial of Cephes' expf; relative error ~1e-7.
static inline v16 vexp(v16 t) {
    const v16 lo = bcast(-87.0f);
    v16i below = t < lo;
    t = (v16)(((v16i)t & ~below) | ((v16i)lo & below));
    v16 z = t * 1.44269504088896341f;
    const v16 magic = bcast(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    v16 n = (z + magic) - magic;
    v16 f = t - n * 0.693359375f;
    f = f - n * -2.12194440e-4f;
    v16 p = bcast(1.9875691500e-4f);
    p = p * f + 1.3981999507e-3f;
    p = p * f + 8.3334519073e-3f;
    p = p * f + 4.1665795894e-2f;
    p = p * f + 1.6666665459e-1f;
    p = p * f + 5.0000001201e-1f;
    p = p * f * f + f + 1.0f;
    v16i e = (__builtin_convertvector(n, v16i) + 127) << 23;
    return p * (v16)e;
}


typedef int32_t v16m __attribute__((vector_size(64)));
// In-place transpose of a 16x16 block held as 16 vectors (4 rounds of two-vector shuffles).
static inline void transpose16(v16 r[16]) {
    v16 t[16];
    const v16m lo32 = {0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29};
    const v16m hi32 = {2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31};
    for (int i = 0; i < 16; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], lo32);
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi32);
    }
    const v16m lo64 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
    const v16m hi64 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
    for (int i = 0; i < 16; i += 4)
        for (int k = 0; k < 2; k++) {
            r[i + 2 * k] = __builtin_shuffle(t[i + k], t[i + k + 2], lo64);
            r[i + 2 * k + 1] = __builtin_shuffle(t[i + k], t[i + k + 2], hi64);
        }
    const v16m lo128 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
    const v16m hi128 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
    for (int i = 0; i < 16; i += 8)
        for (int k = 0; k < 4; k++) {
            t[i + k] = __builtin_shuffle(r[i + k], r[i + k + 4], lo128);
            t[i + k + 4] = __builtin_shuffle(r[i + k], r[i + k + 4], hi128);
        }
    const v16m lo256 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    const v16m hi256 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    for (int k = 0; k < 8; k++) {
        r[k] = __builtin_shuffle(t[k], t[k + 8], lo256);
        r[k + 8] = __builtin_shuffle(t[k], t[k + 8], hi256);
    }
}

typedef struct {
    float *q, *k, *g;      /* rows of 16: q pre-scaled, k, dO (padded with zero rows) */
    v16 *kt, *vt;          /* [RK/16][16 d]: keys in lanes */
    float *lse, *D;        /* [RQ] */
    float *P, *dS, *dST;   /* [IB][JB] probabilities, score gradients; [JB][IB] transposed */
    v16 *dqt, *dkt, *dvt;  /* [RQ/16 or RK/16][16 d]: dQ^T, dK^T, dV^T, rows in lanes */
} work_t;

// Each thread keeps one workspace for all calls, grown when a call needs more (well under 1 MB
// for a thousand rows), instead of a dozen allocations per call.
static __thread char *arena_base = NULL;
static __thread size_t arena_size = 0, arena_used = 0;

static int arena_reserve(size_t bytes) {
    arena_used = 0;
    if (bytes <= arena_size) return 1;
    free(arena_base);
    arena_size = (bytes + 4095) / 4096 * 4096;
    arena_base = aligned_alloc(64, arena_size);
    if (!arena_base) arena_size = 0;
    return arena_base != NULL;
}

static void *zalloc(size_t bytes) {  /* zeroed, 64-byte aligned, from the thread's workspace */
    bytes = (bytes + 63) / 64 * 64;
    void *p = arena_base + arena_used;
    arena_used += bytes;
    memset(p, 0, bytes);
    return p;
}

// 32 x 32 block of products out[r][j] = sum_d a[r][d] * bt[j / 16][d][j % 16]: S and dP in
// the backward (rows = queries, lanes = keys), S^T in the forward (rows = keys, lanes = queries).
static inline void block_products(const float *a, const v16 *bt, float *out) {
    for (int q0 = 0; q0 < IB; q0 += 8) {
        v16 acc[8][2];
        for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = (v16){0};
        for (int d = 0; d < DH; d++) {
            v16 b0 = bt[d], b1 = bt[DH + d];
            for (int i = 0; i < 8; i++) {
                v16 x = bcast(a[(q0 + i) * DH + d]);
                acc[i][0] += x * b0;
                acc[i][1] += x * b1;
            }
        }
        for (int i = 0; i < 8; i++) {
            *(v16 *)(out + (q0 + i) * JB) = acc[i][0];
            *(v16 *)(out + (q0 + i) * JB + 16) = acc[i][1];
        }
    }
}

// acc_t[v][d] += sum_r a[r][d] * m[r][16 v + lane] over `rows` rows (m's rows are 32 floats,
// two vectors v), in two halves of 8 dimensions so that the accumulators stay in registers.
// dV = P^T dO and dK = dS^T Q (lanes over keys), dQ^T = K^T dS^T and O^T = V^T P^T (lanes over
// queries).
static inline void accumulate_products(const float *a, const float *m, int rows,
                                       v16 *acc_t /*[2][16 d]*/) {
    for (int half = 0; half < 2; half++) {
        v16 acc[8][2];
        for (int i = 0; i < 8; i++) {
            acc[i][0] = acc_t[half * 8 + i];
            acc[i][1] = acc_t[DH + half * 8 + i];
        }
        for (int r = 0; r < rows; r++) {
            v16 m0 = *(const v16 *)(m + r * 32), m1 = *(const v16 *)(m + r * 32 + 16);
            for (int i = 0; i < 8; i++) {
                v16 x = bcast(a[r * DH + half * 8 + i]);
                acc[i][0] += x * m0;
                acc[i][1] += x * m1;
            }
        }
        for (int i = 0; i < 8; i++) {
            acc_t[half * 8 + i] = acc[i][0];
            acc_t[DH + half * 8 + i] = acc[i][1];
        }
    }
}

// qkv: [C, R, 3E] (element strides col_stride, row_stride, 1), E = 16 H, heads of q | k | v.
// out, dout: [C, R, E] contiguous (attention output and its gradient).
// lse: log-sum-exp of the scaled scores, element (c, h, i) at c*lse_c + h*lse_h + i*lse_i.
// dqkv: [C, R, 3E] contiguous, written in full. Returns 0, or 1 if memory ran out.
int attn16_backward(const float *qkv, int64_t col_stride, int64_t row_stride, int C, int R, int H,
                    const float *out, const float *dout, const float *lse, int64_t lse_c,
                    int64_t lse_h, int64_t lse_i, float *dqkv, int nthreads) {
    const int E = H * DH;
    const float scale = 0.25f;
    const int RQ = (R + IB - 1) / IB * IB, RK = (R + JB - 1) / JB * JB;
    int failed = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        work_t w = {0};
        const size_t rows_q = (size_t)RQ * DH * 4, rows_k = (size_t)RK * DH * 4;
        if (arena_reserve(3 * rows_q + 5 * rows_k + 2 * (size_t)RQ * 4 + 3 * IB * JB * 4 + 13 * 64)) {
            w.q = zalloc(rows_q);
            w.k = zalloc(rows_k);
            w.g = zalloc(rows_q);
            w.kt = zalloc(rows_k);
            w.vt = zalloc(rows_k);
            w.lse = zalloc((size_t)RQ * 4);
            w.D = zalloc((size_t)RQ * 4);
            w.P = zalloc(IB * JB * 4);
            w.dS = zalloc(IB * JB * 4);
            w.dST = zalloc(IB * JB * 4);
            w.dqt = zalloc(rows_q);
            w.dkt = zalloc(rows_k);
            w.dvt = zalloc(rows_k);
        } else {
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int ch = 0; ch < C * H; ch++) {
            if (failed) continue;
            const int c = ch / H, h = ch % H;
            const float *base = qkv + c * col_stride;
            for (int i0 = 0; i0 < R; i0 += 16) {
                v16 kb[16], vb[16];
                for (int l = 0; l < 16; l++) {
                    int i = i0 + l;
                    if (i >= R) { kb[l] = vb[l] = (v16){0}; continue; }
                    const float *row = base + (int64_t)i * row_stride;
                    v16 qi = load_u(row + h * DH), gi = load_u(dout + ((int64_t)c * R + i) * E + h * DH);
                    v16 oi = load_u(out + ((int64_t)c * R + i) * E + h * DH);
                    kb[l] = load_u(row + E + h * DH);
                    vb[l] = load_u(row + 2 * E + h * DH);
                    *(v16 *)(w.q + i * DH) = qi * scale;
                    *(v16 *)(w.k + i * DH) = kb[l];
                    *(v16 *)(w.g + i * DH) = gi;
                    w.D[i] = hsum(gi * oi);
                    w.lse[i] = lse[c * lse_c + h * lse_h + i * lse_i];
                }
                transpose16(kb);
                transpose16(vb);
                for (int d = 0; d < DH; d++) {
                    w.kt[(i0 / 16) * DH + d] = kb[d];
                    w.vt[(i0 / 16) * DH + d] = vb[d];
                }
            }
            memset(w.dqt, 0, (size_t)RQ * DH * 4);
            memset(w.dkt, 0, (size_t)RK * DH * 4);
            memset(w.dvt, 0, (size_t)RK * DH * 4);
            for (int j0 = 0; j0 < RK; j0 += JB) {
                v16 keymask[2];
                for (int l = 0; l < JB; l++) keymask[l / 16][l % 16] = j0 + l < R ? 1.0f : 0.0f;
                const v16 *kt = w.kt + (j0 / 16) * DH, *vt = w.vt + (j0 / 16) * DH;
                for (int i0 = 0; i0 < R; i0 += IB) {
                    block_products(w.q + i0 * DH, kt, w.P);   /* S */
                    block_products(w.g + i0 * DH, vt, w.dS);  /* dP */
                    for (int qi = 0; qi < IB; qi++) {
                        float l = w.lse[i0 + qi], Dq = w.D[i0 + qi];
                        for (int kv = 0; kv < 2; kv++) {
                            v16 *s = (v16 *)(w.P + qi * JB + kv * 16);
                            v16 *dp = (v16 *)(w.dS + qi * JB + kv * 16);
                            v16 p = vexp(*s - l) * keymask[kv];
                            *s = p;
                            *dp = p * (*dp - Dq);
                        }
                    }
                    accumulate_products(w.g + i0 * DH, w.P, IB, w.dvt + (j0 / 16) * DH);
                    accumulate_products(w.q + i0 * DH, w.dS, IB, w.dkt + (j0 / 16) * DH);
                    /* dQ^T[d][q] += K[j][d] * dS^T[j][q]: dS transposed 16 x 16 at a time */
                    for (int qb = 0; qb < IB / 16; qb++)
                        for (int kb = 0; kb < JB / 16; kb++) {
                            v16 tile[16];
                            for (int r = 0; r < 16; r++)
                                tile[r] = *(v16 *)(w.dS + (qb * 16 + r) * JB + kb * 16);
                            transpose16(tile);
                            for (int r = 0; r < 16; r++)
                                *(v16 *)(w.dST + (kb * 16 + r) * IB + qb * 16) = tile[r];
                        }
                    accumulate_products(w.k + j0 * DH, w.dST, JB, w.dqt + (i0 / 16) * DH);
                }
            }
            for (int i0 = 0; i0 < R; i0 += 16) {
                v16 qb[16], kb[16], vb[16];
                for (int d = 0; d < DH; d++) {
                    qb[d] = w.dqt[(i0 / 16) * DH + d];
                    kb[d] = w.dkt[(i0 / 16) * DH + d];
                    vb[d] = w.dvt[(i0 / 16) * DH + d];
                }
                transpose16(qb);
                transpose16(kb);
                transpose16(vb);
                for (int l = 0; l < 16 && i0 + l < R; l++) {
                    float *row = dqkv + ((int64_t)c * R + i0 + l) * 3 * E;
                    store_u(row + h * DH, qb[l] * scale);
                    store_u(row + E + h * DH, kb[l]);
                    store_u(row + 2 * E + h * DH, vb[l]);
                }
            }
        }
    }
    return failed;
}

// Forward pass, lanes over queries: for a block of 32 queries, S^T[j][q] = sum_d K[j][d] Q[q][d]
// (scaled) for every key j, the softmax over j lane by lane (no horizontal reductions), then
// O^T[d][q] = sum_j V[j][d] P^T[j][q]; both products register-blocked like the backward's.
// qkv as for the backward; out: [C, R, E] contiguous; lse as for the backward (written).
int attn16_forward(const float *qkv, int64_t col_stride, int64_t row_stride, int C, int R, int H,
                   float *out, float *lse, int64_t lse_c, int64_t lse_h, int64_t lse_i,
                   int nthreads) {
    const int E = H * DH;
    const float scale = 0.25f;
    const int RQ = (R + IB - 1) / IB * IB, RK = (R + JB - 1) / JB * JB;
    int failed = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        const size_t rows_q = (size_t)RQ * DH * 4, rows_k = (size_t)RK * DH * 4;
        float *k = NULL, *v = NULL, *st = NULL;
        v16 *qt = NULL;
        if (arena_reserve(2 * rows_k + rows_q + (size_t)KC * IB * 4 + 4 * 64)) {
            k = zalloc(rows_k);
            v = zalloc(rows_k);
            qt = zalloc(rows_q);               /* [RQ/16][16 d]: queries in lanes */
            st = zalloc((size_t)KC * IB * 4);  /* [KC][IB]: a chunk's scores, then probabilities */
        } else {
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int ch = 0; ch < C * H; ch++) {
            if (failed) continue;
            const int c = ch / H, h = ch % H;
            const float *base = qkv + c * col_stride;
            for (int i0 = 0; i0 < R; i0 += 16) {
                v16 qb[16];
                for (int l = 0; l < 16; l++) {
                    int i = i0 + l;
                    if (i >= R) { qb[l] = (v16){0}; continue; }
                    const float *row = base + (int64_t)i * row_stride;
                    qb[l] = load_u(row + h * DH) * scale;
                    *(v16 *)(k + i * DH) = load_u(row + E + h * DH);
                    *(v16 *)(v + i * DH) = load_u(row + 2 * E + h * DH);
                }
                transpose16(qb);
                for (int d = 0; d < DH; d++) qt[(i0 / 16) * DH + d] = qb[d];
            }
            for (int i0 = 0; i0 < R; i0 += IB) {
                const v16 *qblock = qt + (i0 / 16) * DH;
                /* Online softmax over chunks of KC keys, so that the chunk's scores stay in L1. */
                v16 mx[2] = {bcast(-INFINITY), bcast(-INFINITY)};
                v16 sum[2] = {(v16){0}, (v16){0}};
                v16 ot[2][DH];
                for (int d = 0; d < DH; d++) ot[0][d] = ot[1][d] = (v16){0};
                for (int c0 = 0; c0 < R; c0 += KC) {
                    const int nk = R - c0 < KC ? R - c0 : KC;
                    for (int j0 = 0; j0 < nk; j0 += JB)
                        block_products(k + (c0 + j0) * DH, qblock, st + j0 * IB);
                    v16 cm[2] = {mx[0], mx[1]};
                    for (int j = 0; j < nk; j++)
                        for (int qv = 0; qv < 2; qv++) cm[qv] = vmax(cm[qv], *(v16 *)(st + j * IB + qv * 16));
                    for (int qv = 0; qv < 2; qv++) {
                        v16 shrink = vexp(mx[qv] - cm[qv]); /* exp(-inf) -> 0 on the first chunk */
                        sum[qv] *= shrink;
                        for (int d = 0; d < DH; d++) ot[qv][d] *= shrink;
                        mx[qv] = cm[qv];
                    }
                    for (int j = 0; j < nk; j++)
                        for (int qv = 0; qv < 2; qv++) {
                            v16 *sc = (v16 *)(st + j * IB + qv * 16);
                            v16 pr = vexp(*sc - mx[qv]);
                            *sc = pr;
                            sum[qv] += pr;
                        }
                    /* O^T[d][q] += V[j][d] * P^T[j][q] */
                    accumulate_products(v + c0 * DH, st, nk, &ot[0][0]);
                }
                for (int qv = 0; qv < 2; qv++) {
                    transpose16(ot[qv]);
                    for (int l = 0; l < 16; l++) {
                        int i = i0 + qv * 16 + l;
                        if (i >= R) break;
                        float total = sum[qv][l];
                        store_u(out + ((int64_t)c * R + i) * E + h * DH, ot[qv][l] * (1.0f / total));
                        lse[c * lse_c + h * lse_h + i * lse_i] = mx[qv][l] + logf(total);
                    }
                }
            }
        }
    }
    return failed;
}

// ---------------------------------------------------------------------------------------------
// Attention across the columns of each row (the paper's attention across features): every row
// is its own small problem of C tokens (C = features + 1, about 20 in training). PyTorch's
// kernel spends most of its time on per-problem overhead at that size. Here 16 rows share the
// vector lanes: a tile of 16 rows x one head is loaded column by column and transposed
// (rows x 16 d -> 16 d x rows), after which every product and the softmax are element-wise
// across the lanes, with no broadcasts and no horizontal sums.
//
// qkv: [C, N, 3E] contiguous (a group's packed cells, column-major); out: [C, N, E] contiguous;
// lse: [C, H, NP] with NP = N rounded up to 16, log-sum-exp of the scaled scores per
// (column, head, row). Each (tile, head) pair is computed by one thread: deterministic.

// The 16 x 16 tile of rows n0..n0+15 of one column (src: the column's first row, rows
// row_floats apart), floats offset..offset+15 of each row (one head's q, k or v), scaled and
// transposed so that the lanes run over rows; rows past N are zero.
static inline void load_tile(const float *src, int64_t row_floats, int N, int n0, int64_t offset,
                             float scale, v16 *dst /*[16 d]*/) {
    v16 r[16];
    const float *first = src + (int64_t)n0 * row_floats + offset;
    if (n0 + 16 <= N) {  /* a full tile: no per-row test, which costs more than the loads */
        for (int l = 0; l < 16; l++) r[l] = load_u(first + l * row_floats) * scale;
    } else {
        for (int l = 0; l < 16; l++)
            r[l] = n0 + l < N ? load_u(first + l * row_floats) * scale : (v16){0};
    }
    transpose16(r);
    for (int d = 0; d < DH; d++) dst[d] = r[d];
}

// The inverse of load_tile: writes rows n0..min(n0 + 16, N) - 1.
static inline void store_tile(float *dst, int64_t row_floats, int N, int n0, int64_t offset,
                              const v16 *src /*[16 d]*/, float scale) {
    v16 r[16];
    for (int d = 0; d < DH; d++) r[d] = src[d] * scale;
    transpose16(r);
    float *first = dst + (int64_t)n0 * row_floats + offset;
    const int rows = N - n0 < 16 ? N - n0 : 16;
    for (int l = 0; l < rows; l++) store_u(first + l * row_floats, r[l]);
}

// The q (pre-scaled), k and v tiles of one head for every column of rows n0..n0+15:
// qt, kt, vt [C][16 d]. qkv: [C, N, 3E] contiguous.
static inline void load_qkv_tiles(const float *qkv, int C, int N, int E, int n0, int h,
                                  float scale, v16 *qt, v16 *kt, v16 *vt) {
    for (int i = 0; i < C; i++) {
        const float *column = qkv + (int64_t)i * N * 3 * E;
        load_tile(column, 3 * E, N, n0, h * DH, scale, qt + i * DH);
        load_tile(column, 3 * E, N, n0, E + h * DH, 1.0f, kt + i * DH);
        load_tile(column, 3 * E, N, n0, 2 * E + h * DH, 1.0f, vt + i * DH);
    }
}

// s[j] = sum_d a[d] * bt[j][d] for j < CP (a multiple of 8), eight keys at a time so that eight
// independent FMA chains hide the FMA latency.
static inline void lane_scores(const v16 *a /*[16 d]*/, const v16 *bt /*[CP][16 d]*/, int CP,
                               v16 *s) {
    v16 x[DH];
    for (int d = 0; d < DH; d++) x[d] = a[d];
    for (int j0 = 0; j0 < CP; j0 += 8) {
        v16 acc[8];
        for (int u = 0; u < 8; u++) acc[u] = (v16){0};
        for (int d = 0; d < DH; d++)
            for (int u = 0; u < 8; u++) acc[u] += x[d] * bt[(j0 + u) * DH + d];
        for (int u = 0; u < 8; u++) s[j0 + u] = acc[u];
    }
}

static inline v16 vlog(v16 x) {
    v16 r;
    for (int l = 0; l < 16; l++) r[l] = logf(x[l]);
    return r;
}

// acc[d] = scale * sum_k w[k * stride] * x[k][d] over k < K, with 16 accumulators in registers:
// O = P V in the forward pass, dQ = dS K, dK = dS^T Q and dV = P^T dO in the backward.
static inline void weighted_sum(const v16 *w, int stride, const v16 *x /*[K][16 d]*/, int K,
                                float scale, v16 *acc /*[16 d]*/) {
    v16 a[DH];
    for (int d = 0; d < DH; d++) a[d] = (v16){0};
    for (int k = 0; k < K; k++) {
        const v16 wk = w[k * stride];
        for (int d = 0; d < DH; d++) a[d] += wk * x[k * DH + d];
    }
    for (int d = 0; d < DH; d++) acc[d] = a[d] * scale;
}

int feat16_forward(const float *qkv, int C, int N, int H, float *out, float *lse, int nthreads) {
    const int E = H * DH, NT = (N + 15) / 16, NP = NT * 16, CP = (C + 7) / 8 * 8;
    const float scale = 0.25f;
    int failed = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        v16 *qt = NULL, *kt = NULL, *vt = NULL, *s = NULL;
        const size_t tiles = (size_t)CP * DH * 64;
        if (arena_reserve(3 * tiles + (size_t)CP * 64 + 4 * 64)) {
            qt = zalloc(tiles);
            kt = zalloc(tiles); /* columns C..CP-1 stay zero: their scores are computed, unused */
            vt = zalloc(tiles);
            s = zalloc((size_t)CP * 64);
        } else {
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int th = 0; th < NT * H; th++) {
            if (failed) continue;
            const int n0 = (th / H) * 16, h = th % H;
            load_qkv_tiles(qkv, C, N, E, n0, h, scale, qt, kt, vt);
            for (int i = 0; i < C; i++) {
                lane_scores(qt + i * DH, kt, CP, s);
                v16 mx = s[0];
                for (int j = 1; j < C; j++) mx = vmax(mx, s[j]);
                v16 sum = (v16){0};
                for (int j = 0; j < C; j++) {
                    s[j] = vexp(s[j] - mx);
                    sum += s[j];
                }
                v16 o[DH];
                weighted_sum(s, 1, vt, C, 1.0f, o);
                const v16 inv = 1.0f / sum;
                for (int d = 0; d < DH; d++) o[d] *= inv;
                store_tile(out + (int64_t)i * N * E, E, N, n0, h * DH, o, 1.0f);
                *(v16 *)(lse + ((int64_t)i * H + h) * NP + n0) = mx + vlog(sum);
            }
        }
    }
    return failed;
}

// Backward of feat16_forward (FlashAttention-2 order within a tile): for each query column i,
// recompute P = exp(S - lse) and dP = dO V^T, then dS = P * (dP - D) with D = rowsum(dO * O);
// then dQ = dS K * scale, dK = dS^T Q * scale and dV = P^T dO, each a weighted sum with its
// accumulators in registers. dqkv: [C, N, 3E], written in full.
int feat16_backward(const float *qkv, int C, int N, int H, const float *out, const float *dout,
                    const float *lse, float *dqkv, int nthreads) {
    const int E = H * DH, NT = (N + 15) / 16, NP = NT * 16, CP = (C + 7) / 8 * 8;
    const float scale = 0.25f;
    int failed = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        v16 *qt = NULL, *kt = NULL, *vt = NULL, *gt = NULL, *P = NULL, *dS = NULL;
        v16 *s = NULL, *dp = NULL;
        const size_t tiles = (size_t)CP * DH * 64, squares = (size_t)C * CP * 64;
        if (arena_reserve(4 * tiles + 2 * squares + 2 * (size_t)CP * 64 + 8 * 64)) {
            qt = zalloc(tiles);
            kt = zalloc(tiles);
            vt = zalloc(tiles);
            gt = zalloc(tiles);
            P = zalloc(squares);  /* [C queries][CP keys] */
            dS = zalloc(squares);
            s = zalloc((size_t)CP * 64);
            dp = zalloc((size_t)CP * 64);
        } else {
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int th = 0; th < NT * H; th++) {
            if (failed) continue;
            const int n0 = (th / H) * 16, h = th % H;
            load_qkv_tiles(qkv, C, N, E, n0, h, scale, qt, kt, vt);
            for (int i = 0; i < C; i++)
                load_tile(dout + (int64_t)i * N * E, E, N, n0, h * DH, 1.0f, gt + i * DH);
            for (int i = 0; i < C; i++) {
                v16 o[DH], g[DH];
                load_tile(out + (int64_t)i * N * E, E, N, n0, h * DH, 1.0f, o);
                v16 D = (v16){0};
                for (int d = 0; d < DH; d++) D += gt[i * DH + d] * o[d];
                lane_scores(qt + i * DH, kt, CP, s);
                lane_scores(gt + i * DH, vt, CP, dp);
                const v16 l = *(const v16 *)(lse + ((int64_t)i * H + h) * NP + n0);
                for (int j = 0; j < C; j++) {
                    const v16 p = vexp(s[j] - l);
                    P[i * CP + j] = p;
                    dS[i * CP + j] = p * (dp[j] - D);
                }
                weighted_sum(dS + i * CP, 1, kt, C, scale, g);
                store_tile(dqkv + (int64_t)i * N * 3 * E, 3 * E, N, n0, h * DH, g, 1.0f);
            }
            for (int j = 0; j < C; j++) {
                v16 g[DH];
                float *column = dqkv + (int64_t)j * N * 3 * E;
                weighted_sum(dS + j, CP, qt, C, 1.0f, g); /* q is pre-scaled */
                store_tile(column, 3 * E, N, n0, E + h * DH, g, 1.0f);
                weighted_sum(P + j, CP, gt, C, 1.0f, g);
                store_tile(column, 3 * E, N, n0, 2 * E + h * DH, g, 1.0f);
            }
        }
    }
    return failed;
}
