/*
 * embedding.cu — token embedding lookup (grpo/ops.h):
 *   forward:   out (N,C) = wte (V,C)[ids (N)]        (forward_w: wte of a GRPO_DTYPE_*, widened)
 *   backward:  dwte (V,C) += dout (N,C) scattered by ids
 * Both are row moves of rows.cu: the lookup is a row gather, and the backward is exactly
 * scatter_add_rows with weight 1 (dwte[ids[n]] += dout[n]), whose bucket-owned rows add the
 * repeated ids of a batch in token order with no float atomics: the same bits on every run, and
 * the CPU backend's, which also adds each element's tokens in order.
 * ids must lie in [0, V) (the model checks them; the table does not know V): a negative id gives
 * a NaN row forward and is skipped backward.
 */
#include "kernel_util.h"

void cuda_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte,
                            int32_t N, int32_t C) {
    cuda_gather_rows_typed((cuda_ctx *)ctx, out, wte, GRPO_DTYPE_F32, ids, N, C,
                           "embedding_forward");
}

void cuda_embedding_forward_w(void *ctx, float *out, const int32_t *ids, const void *wte,
                              int32_t wtype, int32_t N, int32_t C) {
    cuda_gather_rows_typed((cuda_ctx *)ctx, out, wte, wtype, ids, N, C, "embedding_forward_w");
}

void cuda_embedding_backward(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                             int32_t N, int32_t C) {
    if (!dwte) return;
    cuda_scatter_add_rows(ctx, dwte, dout, ids, NULL, N, C);
}
