/*
 * rows.cu — moving rows between a (N,C) tensor and a (M,C) one through an index idx (M), for
 * mixture-of-experts routing, and the row gather the embedding shares (grpo/ops.h):
 *   gather_rows:               out[m] = inp[idx[m]]                 (any dtype of inp: widened)
 *   scatter_add_rows:          out[idx[m]] += w[m] * inp[m]         (w NULL: 1)
 *   scatter_add_rows_backward: dinp[m] = w[m] * dout[idx[m]], dw[m] = dot(dout[idx[m]], inp[m])
 *
 * scatter_add_rows without float atomics: idx may repeat, and atomics would add a row's
 * contributions in whatever order the blocks run. Instead every output row is owned by one
 * bucket (row % buckets): a block (bucket, column tile) walks all of idx in order of m and adds
 * only the rows of its bucket, one thread per column. Each output element is thus summed by one
 * thread in order of m, as the CPU backend does: the same bits on every run (and the CPU's).
 * A negative index (the model validates its inputs; the table does not know N) is skipped by the
 * scatter and gives a NaN row in a gather, so it shows in the loss instead of reading outside.
 */
#include "kernel_util.h"

#define SCATTER_THREADS 128    /* columns per block, and idx entries staged per round */
#define SCATTER_MAX_BUCKETS 64 /* blocks sharing one column tile (each scans all of idx) */
#define SCATTER_ROWS_PER_BUCKET 64

static __device__ __forceinline__ float load_elem(const float *p, uint64_t i) { return p[i]; }
static __device__ __forceinline__ float load_elem(const uint16_t *p, uint64_t i) {
    return grpo_ld_bf16(p[i]);
}

/* out (M,C) = inp[idx] (rows of T widened to fp32), grid-stride over the M*C elements. */
template <typename T>
__global__ void gather_rows_kernel(float *out, const T *inp, const int32_t *idx, int32_t M,
                                   int32_t C) {
    uint64_t total = (uint64_t)M * (uint64_t)C;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t m = i / (uint64_t)C, c = i % (uint64_t)C;
        int32_t r = idx[m];
        out[i] = r >= 0 ? load_elem(inp, (uint64_t)r * C + c) : __int_as_float(0x7fc00000);
    }
}

void cuda_gather_rows_typed(cuda_ctx *ctx, float *out, const void *inp, int32_t itype,
                            const int32_t *idx, int32_t M, int32_t C, const char *op) {
    CUDA_REQUIRE(M >= 0 && C >= 0, op, "row count and width must be >= 0");
    CUDA_REQUIRE(itype == GRPO_DTYPE_F32 || itype == GRPO_DTYPE_BF16, op, "unknown dtype");
    if (M == 0 || C == 0) return;
    unsigned grid = cuda_grid((uint64_t)M * C, CUDA_EW_THREADS);
    if (itype == GRPO_DTYPE_F32)
        GRPO_LAUNCH(gather_rows_kernel<float>, grid, CUDA_EW_THREADS, 0, ctx->stream, out,
                    (const float *)inp, idx, M, C);
    else
        GRPO_LAUNCH(gather_rows_kernel<uint16_t>, grid, CUDA_EW_THREADS, 0, ctx->stream, out,
                    (const uint16_t *)inp, idx, M, C);
    CUDA_CHECK_LAUNCH(op);
}

void cuda_gather_rows(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                      int32_t C) {
    cuda_gather_rows_typed((cuda_ctx *)ctx, out, inp, GRPO_DTYPE_F32, idx, M, C, "gather_rows");
}

/* grid (column tiles, buckets), SCATTER_THREADS threads: see the file comment. */
__global__ void scatter_add_rows_kernel(float *out, const float *inp, const int32_t *idx,
                                        const float *w, int32_t M, int32_t C, int32_t buckets) {
    __shared__ int32_t s_idx[SCATTER_THREADS], s_own[SCATTER_THREADS]; /* row, its bucket */
    __shared__ float s_w[SCATTER_THREADS];
    int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x), bucket = (int32_t)blockIdx.y;
    for (int32_t m0 = 0; m0 < M; m0 += SCATTER_THREADS) {
        int32_t m = m0 + (int32_t)threadIdx.x, len = M - m0;
        if (len > SCATTER_THREADS) len = SCATTER_THREADS;
        __syncthreads(); /* the previous round's entries are read */
        if (m < M) { /* each entry's bucket computed once, not by every thread */
            int32_t r = idx[m];
            s_idx[threadIdx.x] = r;
            s_own[threadIdx.x] = r >= 0 ? r % buckets : -1;
            s_w[threadIdx.x] = w ? w[m] : 1.0f;
        }
        __syncthreads();
        if (c >= C) continue;
        for (int32_t j = 0; j < len; j++) {
            if (s_own[j] != bucket) continue;
            float *dst = out + (int64_t)s_idx[j] * C + c;
            /* wm * src, then the add, each rounded as the CPU does (no fma) */
            *dst = CUDA_ADD_RN(*dst, CUDA_MUL_RN(s_w[j], inp[(int64_t)(m0 + j) * C + c]));
        }
    }
}

void cuda_scatter_add_rows(void *ctx_, float *out, const float *inp, const int32_t *idx,
                           const float *w, int32_t M, int32_t C) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(M >= 0 && C >= 0, "scatter_add_rows", "row count and width must be >= 0");
    if (M == 0 || C == 0) return;
    int32_t buckets = (M + SCATTER_ROWS_PER_BUCKET - 1) / SCATTER_ROWS_PER_BUCKET;
    if (buckets > SCATTER_MAX_BUCKETS) buckets = SCATTER_MAX_BUCKETS;
    dim3 grid(cuda_blocks((uint64_t)C, SCATTER_THREADS), (unsigned)buckets);
    GRPO_LAUNCH(scatter_add_rows_kernel, grid, SCATTER_THREADS, 0, ctx->stream, out, inp, idx, w,
                M, C, buckets);
    CUDA_CHECK_LAUNCH("scatter_add_rows");
}

/* One block of CUDA_DSUM_THREADS per row m: dinp row written, dw[m] summed in double. */
__global__ void scatter_add_rows_backward_kernel(float *dinp, float *dw, const float *dout,
                                                 const float *inp, const int32_t *idx,
                                                 const float *w, int32_t C) {
    int64_t m = blockIdx.x;
    int32_t r = idx[m];
    const float *g = dout + (int64_t)(r >= 0 ? r : 0) * C;
    float wm = w ? w[m] : 1.0f, nan = __int_as_float(0x7fc00000);
    double acc = 0.0;
    for (int32_t c = (int32_t)threadIdx.x; c < C; c += (int32_t)blockDim.x) {
        float gc = r >= 0 ? g[c] : nan;
        if (dinp) dinp[m * C + c] = wm * gc;
        if (dw) acc += (double)gc * (double)inp[m * C + c];
    }
    if (!dw) return; /* uniform over the block: the reduction below is all or none */
    double tot = grpo_block_sum_double(acc);
    if (threadIdx.x == 0) dw[m] = (float)tot;
}

void cuda_scatter_add_rows_backward(void *ctx_, float *dinp, float *dw, const float *dout,
                                    const float *inp, const int32_t *idx, const float *w,
                                    int32_t M, int32_t C) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(M >= 0 && C >= 0, "scatter_add_rows_backward",
                 "row count and width must be >= 0");
    if ((!dinp && !dw) || M == 0) return;
    GRPO_LAUNCH(scatter_add_rows_backward_kernel, (unsigned)M, CUDA_DSUM_THREADS, 0, ctx->stream,
                dinp, dw, dout, inp, idx, w, C);
    CUDA_CHECK_LAUNCH("scatter_add_rows_backward");
}
