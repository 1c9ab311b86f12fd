/*
 * sample.cu — grpo_ops.sample_rows: one decode step's tokens drawn on the device, so only R ids
 * and log-probs go back to the host (grpo/ops.h; the reference is core/host/sampling.c's
 * grpo_sample_row, transformers' processors in their order).
 *
 * One block of SAMPLE_THREADS per row. The row is processed in a scratch copy, work (R,V) fp32,
 * with its probabilities in probs (R,V) doubles; nothing is sorted:
 *   repetition penalty  every history entry writes its token's penalised RAW logit, so a token
 *                       repeated in the history is penalised exactly once, whoever writes last;
 *   temperature         x / temperature (a division, as the CPU: not a multiply by 1/T);
 *   top-k               the k-th largest value by a 32-step radix select over order-preserving
 *                       keys (block-wide counts of keys >= a candidate), then x < it -> -inf;
 *   top-p               in ascending (value, id) order the tail to remove is every key <= K*, K*
 *                       the largest key with sum(p of keys <= K*) <= 1 - top_p: found bit by bit
 *                       (32 value bits, then the id bits) with block-wide double sums, O(V log V)
 *                       per row; the largest key (the most likely token) is always kept;
 *   min-p               p < min_p * p_max, where p_max = 1 / sum (the maximum's exp(0) / sum);
 *   draw                each thread owns a contiguous chunk of ids: chunk sums, their prefix in id
 *                       order (thread 0), then the chunk where the cumulative sum passes u scans
 *                       its ids; the lowest id found wins.
 * Softmaxes are the CPU's operations (float max, exp((double)x - max), double sums, p = e / sum);
 * only the order of the double sums differs (block trees and chunks vs left to right), which
 * moves a cumulative boundary by a few ulps of double: ids equal the host's except for a u (or a
 * 1 - top_p) within that of a boundary, and logp may differ from the host's in the last bit.
 */
#include "kernel_util.h"

#define SAMPLE_THREADS CUDA_DSUM_THREADS /* grpo_block_sum_double needs exactly this many */
#define SAMPLE_NONE 0x7fffffff           /* "no token found" in the draw's min-reduction */

typedef struct sample_params {
    float temperature, top_p, min_p, penalty;
    int32_t top_k;
} sample_params;

/* ---- block-wide reductions (every thread of the block calls; every thread gets the result) -- */

enum { RED_SUM, RED_MIN, RED_MAX };

static __device__ __forceinline__ int red2(int a, int b, int op) {
    return op == RED_SUM ? a + b : op == RED_MIN ? (a < b ? a : b) : (a > b ? a : b);
}

static __device__ int block_reduce_int(int v, int op) {
    __shared__ int warp_part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = red2(v, __shfl_xor_sync(0xffffffffu, v, o), op);
    __syncthreads(); /* warp_part may still be read by a previous call */
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    /* lanes past the warps add nothing: 0 to a sum, a copy of warp 0's part to a min or max */
    v = lane < warps ? warp_part[lane] : op == RED_SUM ? 0 : warp_part[0];
    for (int o = 16; o > 0; o >>= 1) v = red2(v, __shfl_xor_sync(0xffffffffu, v, o), op);
    return v;
}

/* ---- keys in value order ------------------------------------------------------------------- */

/* An unsigned key ordered as the float values (-0 keyed as +0: float comparisons tie them). */
static __device__ __forceinline__ uint32_t order_key(float x) {
    uint32_t b = __float_as_uint(x == 0.0f ? 0.0f : x);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
static __device__ __forceinline__ float key_value(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? k & 0x7fffffffu : ~k);
}
/* The key as a signed int of the same order (for block_reduce_int's max). */
static __device__ __forceinline__ int key_signed(uint32_t k) { return (int)(k ^ 0x80000000u); }

/* Key (value, id) of element i is <= (kv, ki): ascending value, ties by ascending id. */
static __device__ __forceinline__ int key_le(uint32_t key, int32_t i, uint32_t kv, int32_t ki) {
    return key < kv || (key == kv && i <= ki);
}

/* ---- row pieces (x: a row of V; thread t owns ids t, t + blockDim, ...) ------------------- */

/* max over the row of x * scale (scale 1: the values themselves). */
static __device__ float row_max(const float *x, float scale, int32_t V) {
    int m = key_signed(order_key(-INFINITY));
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x) {
        int k = key_signed(order_key(CUDA_MUL_RN(x[i], scale)));
        m = k > m ? k : m;
    }
    return key_value((uint32_t)block_reduce_int(m, RED_MAX) ^ 0x80000000u);
}

/* probs = softmax(x) as the CPU forms it; returns the double sum. */
static __device__ double row_softmax(const float *x, int32_t V, double *probs) {
    float mx = row_max(x, 1.0f, V);
    double s = 0.0;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        s += probs[i] = exp((double)x[i] - mx);
    s = grpo_block_sum_double(s);
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x) probs[i] /= s;
    return s;
}

/* log softmax(x * scale)[t], the CPU's log_prob of the scaled row. */
static __device__ float row_log_prob(const float *x, float scale, int32_t V, int32_t t) {
    float mx = row_max(x, scale, V);
    double s = 0.0;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        s += exp((double)CUDA_MUL_RN(x[i], scale) - mx);
    s = grpo_block_sum_double(s);
    return (float)((double)CUDA_MUL_RN(x[t], scale) - mx - log(s));
}

/* The lowest id of the row's maximum (the CPU's argmax: the first strictly greater wins). */
static __device__ int32_t row_argmax(const float *w, int32_t V) {
    int m = key_signed(order_key(row_max(w, 1.0f, V))), first = SAMPLE_NONE;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (key_signed(order_key(w[i])) == m && i < first) first = i;
    first = block_reduce_int(first, RED_MIN);
    return first == SAMPLE_NONE ? 0 : first;
}

/* Keeps every value >= the k-th largest (0 < k < V). */
static __device__ void top_k_filter(float *w, int32_t V, int32_t k) {
    uint32_t ans = 0; /* the largest key with at least k keys >= it: the k-th largest */
    for (int b = 31; b >= 0; b--) {
        uint32_t cand = ans | (1u << b);
        int c = 0;
        for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
            c += order_key(w[i]) >= cand;
        if (block_reduce_int(c, RED_SUM) >= k) ans = cand;
    }
    float threshold = key_value(ans);
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (w[i] < threshold) w[i] = -INFINITY;
    __syncthreads();
}

/* sum of probs over the ids whose key (value, id) <= (kv, ki). */
static __device__ double tail_sum(const float *w, const double *probs, int32_t V, uint32_t kv,
                                  int32_t ki) {
    double s = 0.0;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (key_le(order_key(w[i]), i, kv, ki)) s += probs[i];
    return grpo_block_sum_double(s);
}

/* Removes the ascending tail whose cumulative probability is <= 1 - top_p, keeping the largest
 * (value, id): the CPU's sorted walk, as a search for the tail's last key. */
static __device__ void top_p_filter(float *w, double *probs, int32_t V, float top_p) {
    row_softmax(w, V, probs);
    double limit = 1.0 - (double)top_p;
    int kmax = key_signed(order_key(row_max(w, 1.0f, V))), imax = -1;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (key_signed(order_key(w[i])) == kmax) imax = i;
    imax = block_reduce_int(imax, RED_MAX); /* the last in ascending order: never removed */
    uint32_t kv = 0;
    int32_t ki = 0, id_bits = 0;
    while (id_bits < 31 && (1 << id_bits) < V) id_bits++;
    for (int b = 31; b >= 0; b--)
        if (tail_sum(w, probs, V, kv | (1u << b), 0) <= limit) kv |= 1u << b;
    for (int b = id_bits - 1; b >= 0; b--)
        if (tail_sum(w, probs, V, kv, ki | (1 << b)) <= limit) ki |= 1 << b;
    if (tail_sum(w, probs, V, kv, ki) > limit) return; /* even the smallest key alone passes */
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (i != imax && key_le(order_key(w[i]), i, kv, ki)) w[i] = -INFINITY;
    __syncthreads();
}

/* Removes the tokens whose probability is below min_p times the top one. */
static __device__ void min_p_filter(float *w, double *probs, int32_t V, float min_p) {
    double threshold = (double)min_p * (1.0 / row_softmax(w, V, probs));
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
        if (probs[i] < threshold) w[i] = -INFINITY;
    __syncthreads();
}

/* The first id whose cumulative probability (id order) exceeds u; else the last id of nonzero
 * probability (rounding left the total below u); 0 when there is none. */
static __device__ int32_t draw(const float *w, double *probs, int32_t V, float u) {
    __shared__ double before[SAMPLE_THREADS]; /* each chunk's cumulative start */
    row_softmax(w, V, probs);
    __syncthreads(); /* the chunks read probabilities other threads wrote */
    int32_t chunk = (V + (int32_t)blockDim.x - 1) / (int32_t)blockDim.x;
    int32_t i0 = (int32_t)threadIdx.x * chunk, i1 = i0 + chunk < V ? i0 + chunk : V;
    double s = 0.0;
    for (int32_t i = i0; i < i1; i++)
        if (probs[i] > 0.0) s += probs[i];
    before[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double acc = 0.0;
        for (unsigned t = 0; t < blockDim.x; t++) {
            double c = before[t];
            before[t] = acc;
            acc += c;
        }
    }
    __syncthreads();
    double cum = before[threadIdx.x];
    int found = SAMPLE_NONE, last = -1;
    for (int32_t i = i0; i < i1; i++) {
        if (probs[i] <= 0.0) continue;
        last = i;
        cum += probs[i];
        if (cum > (double)u) {
            found = i;
            break;
        }
    }
    found = block_reduce_int(found, RED_MIN);
    last = block_reduce_int(last, RED_MAX); /* complete whenever no chunk found u */
    return found != SAMPLE_NONE ? found : last >= 0 ? last : 0;
}

/* ---- the kernel: one block per row --------------------------------------------------------- */

__global__ void sample_rows_kernel(int32_t *ids, float *logp, float *plogp, const float *logits,
                                   const float *u, int32_t *hist, const int32_t *n_hist,
                                   int32_t H, int32_t V, sample_params p, float *work,
                                   double *probs) {
    int64_t r = blockIdx.x;
    const float *x = logits + r * V;
    float *w = work + r * V;
    double *pr = probs ? probs + r * V : NULL;
    for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x) w[i] = x[i];
    __syncthreads();
    int32_t nh = n_hist[r];
    if (p.penalty != 1.0f) {
        const int32_t *h = hist + r * H;
        for (int32_t j = (int32_t)threadIdx.x; j < nh && j < H; j += (int32_t)blockDim.x) {
            int32_t t = h[j];
            if (t >= 0 && t < V) w[t] = x[t] < 0 ? x[t] * p.penalty : x[t] / p.penalty;
        }
        __syncthreads();
    }
    int32_t t;
    if (p.temperature <= 0.0f) {
        t = row_argmax(w, V);
    } else {
        if (p.temperature != 1.0f)
            for (int32_t i = (int32_t)threadIdx.x; i < V; i += (int32_t)blockDim.x)
                w[i] /= p.temperature;
        __syncthreads();
        if (p.top_k > 0 && p.top_k < V) top_k_filter(w, V, p.top_k);
        if (p.top_p < 1.0f) top_p_filter(w, pr, V, p.top_p);
        if (p.min_p > 0.0f) min_p_filter(w, pr, V, p.min_p);
        t = draw(w, pr, V, u[r]);
    }
    float lp = row_log_prob(w, 1.0f, V, t), plp = 0.0f;
    if (plogp) plp = row_log_prob(x, p.temperature > 0.0f ? 1.0f / p.temperature : 1.0f, V, t);
    if (threadIdx.x == 0) {
        ids[r] = t, logp[r] = lp;
        if (plogp) plogp[r] = plp;
        if (nh >= 0 && nh < H) hist[r * H + nh] = t; /* the history's next cell */
    }
}

void cuda_sample_rows(void *ctx_, int32_t *ids, float *logp, float *plogp, const float *logits,
                      const float *u, int32_t *hist, const int32_t *n_hist, int32_t H, int32_t R,
                      int32_t V, float temperature, int32_t top_k, float top_p, float min_p,
                      float repetition_penalty) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(R >= 0 && V > 0 && H >= 0, "sample_rows", "R >= 0, V > 0 and H >= 0");
    if (R == 0) return;
    sample_params p = {temperature, top_p, min_p, repetition_penalty, top_k};
    float *work = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP, (uint64_t)R * V * sizeof(float));
    double *probs = temperature > 0.0f ? (double *)cuda_scratch(ctx, CUDA_SCRATCH_OP2,
                                                                (uint64_t)R * V * sizeof(double))
                                       : NULL;
    GRPO_LAUNCH(sample_rows_kernel, (unsigned)R, SAMPLE_THREADS, 0, ctx->stream, ids, logp, plogp,
                logits, u, hist, n_hist, H, V, p, work, probs);
    CUDA_CHECK_LAUNCH("sample_rows");
}
