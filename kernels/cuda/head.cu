/*
 * head.cu — the fused LM head on the GPU: log p(target), lse and entropy without the (N,V)
 * logits. Semantics as kernels/cpu/head.c (the reference):
 *
 *   z (rows,VC) = scale * hidden (rows,C) @ w[v0:v0+VC] (VC,C)^T     one vocab chunk at a time,
 *                 cuda_gemm into the CUDA_SCRATCH_OP slot
 *   running (per row, fp32): max m, s = sum e^{z-m}, u = sum e^{z-m} (z-m), the target's logit
 *   lse = m + log s; logp = z[target] - lse; entropy = log s - u / s
 *   backward, per chunk (recomputed):
 *     G = dlogp * scale * (onehot - p) - dentropy * scale * p * (z - lse + H),  p = e^{z - lse}
 *     dhidden (rows,C) = sum over chunks of G @ w_chunk     (written: 0 on rows without target)
 *     dw_chunk (VC,C) += G^T @ hidden                        (accumulated)
 * Rows with targets[n] < 0 are skipped (logp, lse, entropy, dhidden 0 there): a one-block kernel
 * lists the others in order (a scan, so the list is the same every run) and the GEMMs run on those
 * rows gathered densely. Their count comes back to the host (one small copy and a stream sync per
 * call; it sizes the GEMMs), with the number of targets >= V, which is refused there. When every
 * row has a target the gather and scatter are skipped and the GEMMs read hidden / write dhidden
 * in place.
 *
 * Memory: rows are taken HEAD_ROWS at a time, so the scratch is at most HEAD_ROWS * (VC + 2C)
 * floats (128 MiB of logits at the defaults) whatever N and V are.
 * Testing hooks: GRPO_CUDA_HEAD_CHUNK and GRPO_CUDA_HEAD_ROWS in the environment override VC and
 * HEAD_ROWS (the parity tests use small values to cross chunk and pass boundaries on tiny shapes).
 */
#include "compat.h"

#include <stdlib.h>

#include "cuda_backend.h"

#define HEAD_VC 8192      /* vocab columns per chunk */
#define HEAD_ROWS 4096    /* rows per pass */
#define HEAD_SCAN 256     /* threads of the row-listing kernel */
#define HEAD_WARPS 8      /* rows (one per warp) per block of the statistics kernel */
#define HEAD_GTHREADS 256 /* threads per block of the gradient kernel */

/* A positive integer from the environment, else dflt. */
static int32_t head_knob(const char *name, int32_t dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    long v = strtol(s, NULL, 10);
    return v > 0 && v < (1L << 30) ? (int32_t)v : dflt;
}

/* idx (N) = the rows n with targets[n] >= 0, in order; hdr[0] = their count, hdr[1] = how many
 * of them have targets[n] >= V. One block: each thread counts a contiguous segment, an inclusive
 * scan of the counts gives each segment's place. */
__global__ void head_rows_kernel(int32_t *idx, int32_t *hdr, const int32_t *targets, int N,
                                 int V) {
    __shared__ int cnt[HEAD_SCAN];
    __shared__ int bad;
    const int tid = threadIdx.x, per = (N + HEAD_SCAN - 1) / HEAD_SCAN;
    const int a = tid * per < N ? tid * per : N, e = a + per < N ? a + per : N;
    if (tid == 0) bad = 0;
    int c = 0, nb = 0;
    for (int n = a; n < e; n++)
        if (targets[n] >= 0) c++, nb += targets[n] >= V;
    cnt[tid] = c;
    __syncthreads();
    if (nb) atomicAdd(&bad, nb); /* integer: order-free */
    for (int off = 1; off < HEAD_SCAN; off <<= 1) {
        int add = tid >= off ? cnt[tid - off] : 0;
        __syncthreads();
        cnt[tid] += add;
        __syncthreads();
    }
    int pos = cnt[tid] - c;
    for (int n = a; n < e; n++)
        if (targets[n] >= 0) idx[pos++] = n;
    if (tid == HEAD_SCAN - 1) hdr[0] = cnt[tid], hdr[1] = bad;
}

/* The row list of a call: idx NULL means every row, in order. */
typedef struct head_rows {
    const int32_t *idx; /* device (nv), or NULL */
    int32_t nv;
} head_rows;

/* Lists the rows with a target (all N when targets is NULL or when none is < 0); refuses a
 * target >= V. The CUDA_SCRATCH_OP2 slot holds the list (N + 2 ints) and then `extra` more
 * 4-byte words for the caller, returned in *extra_out. */
static head_rows head_list_rows(cuda_ctx *ctx, const int32_t *targets, int32_t N, int32_t V,
                                size_t extra, void **extra_out, const char *op) {
    head_rows r = {NULL, N};
    size_t listw = targets ? (size_t)N + 2 : 0;
    int32_t *buf = (int32_t *)cuda_scratch(ctx, CUDA_SCRATCH_OP2, (listw + extra + 1) * 4);
    *extra_out = buf + listw;
    if (!targets) return r;
    GRPO_LAUNCH(head_rows_kernel, 1, HEAD_SCAN, 0, ctx->stream, buf + 2, buf, targets, N, V);
    CUDA_CHECK_LAUNCH(op);
    int32_t hdr[2];
    CUDA_CHECK(cudaMemcpyAsync(hdr, buf, sizeof hdr, cudaMemcpyDeviceToHost, ctx->stream), op);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream), op);
    CUDA_REQUIRE(hdr[1] == 0, op, "a target id >= V");
    r.nv = hdr[0];
    if (r.nv < N) r.idx = buf + 2;
    return r;
}

/* dst (m,C) = src rows idx[0..m) (gather) or dst rows idx[0..m) = src (m,C) (scatter); m is
 * gridDim.y. */
__global__ void head_move_rows_kernel(float *dst, const float *src, const int32_t *idx, int C,
                                      int scatter) {
    const int i = blockIdx.y;
    const size_t a = (size_t)(scatter ? i : idx[i]) * C, b = (size_t)(scatter ? idx[i] : i) * C;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        dst[b + c] = src[a + c];
}

static void head_move_rows(cuda_ctx *ctx, float *dst, const float *src, const int32_t *idx,
                           int32_t m, int32_t C, int scatter, const char *op) {
    dim3 grid(cuda_blocks((uint64_t)C, 256) < 8 ? cuda_blocks((uint64_t)C, 256) : 8, (unsigned)m);
    GRPO_LAUNCH(head_move_rows_kernel, grid, 256, 0, ctx->stream, dst, src, idx, C, scatter);
    CUDA_CHECK_LAUNCH(op);
}

/* The original row of list entry i. */
static __device__ __forceinline__ int head_row(const int32_t *idx, int i) {
    return idx ? idx[i] : i;
}

/* Folds the chunk z (m,vc) of vocab v0.. into the running statistics st (m,4: max, sum e^{z-max},
 * sum e^{z-max}(z-max), target logit) of list rows r0..; first: the first chunk. Warp per row. */
__global__ void head_stats_kernel(float *st, const float *z, const int32_t *targets,
                                  const int32_t *idx, int r0, int m, int vc, int v0, int first) {
    const int lane = threadIdx.x % 32, i = blockIdx.x * HEAD_WARPS + threadIdx.x / 32;
    if (i >= m) return; /* warp-uniform */
    const float *zr = z + (size_t)i * vc;
    float cm = -INFINITY;
    for (int j = lane; j < vc; j += 32) cm = fmaxf(cm, zr[j]);
    cm = grpo_warp_max(cm);
    float cs = 0.0f, cu = 0.0f;
    for (int j = lane; j < vc; j += 32) {
        float d = zr[j] - cm, e = expf(d);
        cs += e, cu += e * d;
    }
    cs = grpo_warp_sum(cs), cu = grpo_warp_sum(cu);
    if (lane != 0) return;
    float *s = st + (size_t)i * 4;
    int tg = targets ? targets[head_row(idx, r0 + i)] : -1;
    float zt = tg >= v0 && tg < v0 + vc ? zr[tg - v0] : 0.0f;
    if (first) {
        s[0] = cm, s[1] = cs, s[2] = cu, s[3] = zt;
        return;
    }
    /* both sums to the new max M: u' = a (u + (m - M) s) + b (cu + (cm - M) cs), s' = a s + b cs */
    float M = fmaxf(s[0], cm), a = expf(s[0] - M), b = expf(cm - M);
    s[2] = a * (s[2] + (s[0] - M) * s[1]) + b * (cu + (cm - M) * cs);
    s[1] = a * s[1] + b * cs;
    s[0] = M;
    if (tg >= v0 && tg < v0 + vc) s[3] = zt;
}

/* logp, lse, entropy (any may be NULL) of list rows r0..r0+m from their statistics. */
__global__ void head_finish_kernel(float *logp, float *lse, float *entropy, const float *st,
                                   const int32_t *targets, const int32_t *idx, int r0, int m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const float *s = st + (size_t)i * 4;
    const int n = head_row(idx, r0 + i);
    float ls = logf(s[1]), l = s[0] + ls;
    if (lse) lse[n] = l;
    if (logp) logp[n] = targets ? s[3] - l : 0.0f;
    if (entropy) entropy[n] = ls - s[2] / s[1];
}

/* z (m,vc) of list rows r0.. becomes G in place (see the top); targets[n] is relative to v0. */
__global__ void head_grad_kernel(float *z, const float *dlogp, const float *dentropy,
                                 const float *entropy, const float *lse, const int32_t *targets,
                                 const int32_t *idx, int r0, int vc, int v0, float scale) {
    const int i = blockIdx.y, n = head_row(idx, r0 + i);
    const float coef = dlogp[n] * scale, ecoef = dentropy ? dentropy[n] * scale : 0.0f;
    const float l = lse[n], h = ecoef != 0.0f ? entropy[n] : 0.0f; /* entropy read only if used */
    const int tg = targets[n] - v0;
    float *g = z + (size_t)i * vc;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < vc; j += gridDim.x * blockDim.x) {
        float d = g[j] - l, p = expf(d), x = -coef * p;
        if (ecoef != 0.0f) x -= ecoef * p * (d + h);
        if (j == tg) x += coef;
        g[j] = x;
    }
}

/* Shapes and buffers of one call. */
typedef struct head_call {
    cuda_ctx *ctx;
    const float *hidden;
    const void *w;
    int32_t wtype, N, C, V, vc, rows;
    float scale;
    head_rows list;
} head_call;

/* Checks, knobs and the row list; room for the forward's per-row statistics (rows,4) in *st
 * (st may be NULL). */
static head_call head_setup(cuda_ctx *ctx, const float *hidden, const void *w, int32_t wtype,
                            const int32_t *targets, int32_t N, int32_t C, int32_t V, float scale,
                            float **st, const char *op) {
    CUDA_REQUIRE(grpo_dtype_size(wtype) != 0, op, "unknown weight dtype");
    CUDA_REQUIRE(V > 0 && C > 0, op, "V and C must be > 0");
    head_call hc = {ctx, hidden, w, wtype, N, C, V, 0, 0, scale, {NULL, 0}};
    hc.vc = head_knob("GRPO_CUDA_HEAD_CHUNK", HEAD_VC);
    hc.rows = head_knob("GRPO_CUDA_HEAD_ROWS", HEAD_ROWS);
    if (hc.rows > 65535) hc.rows = 65535; /* a pass's rows are a grid's y dimension */
    if (hc.rows > N) hc.rows = N;
    void *extra;
    hc.list = head_list_rows(ctx, targets, N, V, st ? (size_t)4 * hc.rows : 0, &extra, op);
    if (st) *st = (float *)extra;
    if (hc.rows > hc.list.nv) hc.rows = hc.list.nv;
    return hc;
}

/* The rows (m,C) of the pass at list entry r0: hidden itself when every row is listed, else
 * gathered into hb. */
static const float *head_pass_hidden(const head_call *hc, float *hb, int32_t r0, int32_t m,
                                     const char *op) {
    if (!hc->list.idx) return hc->hidden + (size_t)r0 * hc->C;
    head_move_rows(hc->ctx, hb, hc->hidden, hc->list.idx + r0, m, hc->C, 0, op);
    return hb;
}

/* z (m,vc) = scale * h (m,C) @ w[v0:v0+vc]^T */
static void head_logits(const head_call *hc, float *z, const float *h, int32_t m, int32_t v0,
                        int32_t vc) {
    const char *wc = (const char *)hc->w + (size_t)v0 * hc->C * grpo_dtype_size(hc->wtype);
    cuda_gemm(hc->ctx, 0, 1, m, vc, hc->C, hc->scale, h, GRPO_DTYPE_F32, hc->C, wc, hc->wtype,
              hc->C, 0.0f, z, vc);
}

void cuda_head_forward_w(void *ctx_, float *logp, float *lse, float *entropy, const float *hidden,
                         const void *w, int32_t wtype, const int32_t *targets, int32_t N,
                         int32_t C, int32_t V, float scale) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    const char *op = "head_forward";
    if (N <= 0) return;
    float *st;
    head_call hc = head_setup(ctx, hidden, w, wtype, targets, N, C, V, scale, &st, op);
    if (hc.list.nv < N) { /* rows without a target stay 0 */
        if (logp) CUDA_CHECK(cudaMemsetAsync(logp, 0, (size_t)N * 4, ctx->stream), op);
        if (lse) CUDA_CHECK(cudaMemsetAsync(lse, 0, (size_t)N * 4, ctx->stream), op);
        if (entropy) CUDA_CHECK(cudaMemsetAsync(entropy, 0, (size_t)N * 4, ctx->stream), op);
    }
    if (hc.list.nv == 0) return;
    /* OP: z (rows,vc) then hb (rows,C) when gathering */
    size_t zf = (size_t)hc.rows * hc.vc, hf = hc.list.idx ? (size_t)hc.rows * C : 0;
    float *z = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP, (zf + hf) * sizeof(float));
    float *hb = z + zf;
    for (int32_t r0 = 0; r0 < hc.list.nv; r0 += hc.rows) {
        int32_t m = hc.list.nv - r0 < hc.rows ? hc.list.nv - r0 : hc.rows;
        const float *h = head_pass_hidden(&hc, hb, r0, m, op);
        for (int32_t v0 = 0; v0 < V; v0 += hc.vc) {
            int32_t vc = V - v0 < hc.vc ? V - v0 : hc.vc;
            head_logits(&hc, z, h, m, v0, vc);
            GRPO_LAUNCH(head_stats_kernel, cuda_blocks((uint64_t)m, HEAD_WARPS), HEAD_WARPS * 32,
                        0, ctx->stream, st, z, targets, hc.list.idx, r0, m, vc, v0, v0 == 0);
            CUDA_CHECK_LAUNCH(op);
        }
        GRPO_LAUNCH(head_finish_kernel, cuda_blocks((uint64_t)m, 128), 128, 0, ctx->stream, logp,
                    lse, entropy, st, targets, hc.list.idx, r0, m);
        CUDA_CHECK_LAUNCH(op);
    }
}

void cuda_head_forward(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                       const float *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                       float scale) {
    cuda_head_forward_w(ctx, logp, lse, entropy, hidden, w, GRPO_DTYPE_F32, targets, N, C, V,
                        scale);
}

/* Every backward op: dentropy and entropy NULL without the entropy term; dw only for fp32 w. */
static void head_backward(cuda_ctx *ctx, float *dhidden, float *dw, const float *dlogp,
                          const float *dentropy, const float *entropy, const float *hidden,
                          const void *w, int32_t wtype, const int32_t *targets, const float *lse,
                          int32_t N, int32_t C, int32_t V, float scale, const char *op) {
    if (N <= 0 || (!dhidden && !dw)) return;
    CUDA_REQUIRE(targets != NULL, op, "targets required");
    CUDA_REQUIRE(!dw || wtype == GRPO_DTYPE_F32, op, "no dw for a weight that is not fp32");
    head_call hc = head_setup(ctx, hidden, w, wtype, targets, N, C, V, scale, NULL, op);
    if (dhidden && hc.list.nv < N) /* rows without a target */
        CUDA_CHECK(cudaMemsetAsync(dhidden, 0, (size_t)N * C * sizeof(float), ctx->stream), op);
    if (hc.list.nv == 0) return;
    /* OP: G (rows,vc), then hb and dh (rows,C each) when gathering */
    const int gather = hc.list.idx != NULL;
    size_t zf = (size_t)hc.rows * hc.vc, hf = gather ? (size_t)hc.rows * C : 0;
    float *g = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP, (zf + 2 * hf) * sizeof(float));
    float *hb = g + zf, *dhb = hb + hf;
    for (int32_t r0 = 0; r0 < hc.list.nv; r0 += hc.rows) {
        int32_t m = hc.list.nv - r0 < hc.rows ? hc.list.nv - r0 : hc.rows;
        const float *h = head_pass_hidden(&hc, hb, r0, m, op);
        float *dh = !dhidden ? NULL : gather ? dhb : dhidden + (size_t)r0 * C;
        for (int32_t v0 = 0; v0 < V; v0 += hc.vc) {
            int32_t vc = V - v0 < hc.vc ? V - v0 : hc.vc;
            head_logits(&hc, g, h, m, v0, vc);
            unsigned bx = cuda_blocks((uint64_t)vc, HEAD_GTHREADS);
            dim3 grid(bx < 16 ? bx : 16, (unsigned)m);
            GRPO_LAUNCH(head_grad_kernel, grid, HEAD_GTHREADS, 0, ctx->stream, g, dlogp, dentropy,
                        entropy, lse, targets, hc.list.idx, r0, vc, v0, scale);
            CUDA_CHECK_LAUNCH(op);
            const char *wc = (const char *)w + (size_t)v0 * C * grpo_dtype_size(wtype);
            if (dh) /* dh (m,C) (+)= G (m,vc) @ w_chunk (vc,C); beta 0 first: dh is written */
                cuda_gemm(ctx, 0, 0, m, C, vc, 1.0f, g, GRPO_DTYPE_F32, vc, wc, wtype, C,
                          v0 == 0 ? 0.0f : 1.0f, dh, C);
            if (dw) /* dw_chunk (vc,C) += G^T (vc,m) @ h (m,C) */
                cuda_gemm(ctx, 1, 0, vc, C, m, 1.0f, g, GRPO_DTYPE_F32, vc, h, GRPO_DTYPE_F32, C,
                          1.0f, dw + (size_t)v0 * C, C);
        }
        if (dh && gather) head_move_rows(ctx, dhidden, dh, hc.list.idx + r0, m, C, 1, op);
    }
}

void cuda_head_backward(void *ctx, float *dhidden, float *dw, const float *dlogp,
                        const float *hidden, const float *w, const int32_t *targets,
                        const float *lse, int32_t N, int32_t C, int32_t V, float scale) {
    head_backward((cuda_ctx *)ctx, dhidden, dw, dlogp, NULL, NULL, hidden, w, GRPO_DTYPE_F32,
                  targets, lse, N, C, V, scale, "head_backward");
}

void cuda_head_backward_entropy(void *ctx, float *dhidden, float *dw, const float *dlogp,
                                const float *dentropy, const float *entropy, const float *hidden,
                                const float *w, const int32_t *targets, const float *lse,
                                int32_t N, int32_t C, int32_t V, float scale) {
    CUDA_REQUIRE(dentropy && entropy, "head_backward_entropy", "dentropy and entropy required");
    head_backward((cuda_ctx *)ctx, dhidden, dw, dlogp, dentropy, entropy, hidden, w,
                  GRPO_DTYPE_F32, targets, lse, N, C, V, scale, "head_backward_entropy");
}

void cuda_head_backward_w(void *ctx, float *dhidden, const float *dlogp, const float *dentropy,
                          const float *entropy, const float *hidden, const void *w, int32_t wtype,
                          const int32_t *targets, const float *lse, int32_t N, int32_t C,
                          int32_t V, float scale) {
    CUDA_REQUIRE(!dentropy == !entropy, "head_backward_w", "dentropy and entropy together");
    head_backward((cuda_ctx *)ctx, dhidden, NULL, dlogp, dentropy, entropy, hidden, w, wtype,
                  targets, lse, N, C, V, scale, "head_backward_w");
}
