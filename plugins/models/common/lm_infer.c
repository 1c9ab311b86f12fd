/*
 * lm_infer.c — KV cache layout, prefill/decode argument checks, last-position logits (see
 * lm_infer.h).
 */
#include "lm_infer.h"

int lm_kv_paged(const grpo_kv_cache *kv) {
    return GRPO_HAS_FIELD(kv, grpo_kv_cache, table_host) && kv->page > 0;
}

/* Blocks of a paged row: ceil(S / page). */
static int32_t kv_blocks(const grpo_kv_cache *kv) { return (kv->S + kv->page - 1) / kv->page; }

float *lm_kv_at(const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l, int32_t kind,
                int32_t r, int32_t s) {
    if (lm_kv_paged(kv)) {
        int32_t p = kv->table_host[(uint64_t)r * kv_blocks(kv) + (uint64_t)(s / kv->page)];
        return kv->data + (uint64_t)p * lm_kv_page_floats(L, KV, kv->page) +
               (((uint64_t)l * 2 + kind) * kv->page + (uint64_t)(s % kv->page)) * KV;
    }
    uint64_t plane = (uint64_t)kv->R * kv->S * KV;
    return kv->data + ((uint64_t)l * 2 + kind) * plane + ((uint64_t)r * kv->S + s) * KV;
}

lm_kv_layer lm_kv_layer_of(const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l) {
    lm_kv_layer kl = {NULL, NULL, kv->S, NULL, NULL, 0, 0, 0};
    if (!lm_kv_paged(kv)) {
        kl.k = lm_kv_at(kv, KV, L, l, 0, 0, 0), kl.v = lm_kv_at(kv, KV, L, l, 1, 0, 0);
        return kl;
    }
    kl.k = kv->data + (uint64_t)l * 2 * kv->page * KV, kl.v = kl.k + (uint64_t)kv->page * KV;
    kl.table = kv->table, kl.table_host = kv->table_host;
    kl.nblk = kv_blocks(kv), kl.page = kv->page;
    kl.pstride = (int64_t)lm_kv_page_floats(L, KV, kv->page);
    return kl;
}

uint64_t lm_kv_floats(int32_t L, uint64_t KV, int32_t R, int32_t S) {
    return (uint64_t)L * 2 * R * S * KV;
}

uint64_t lm_kv_page_floats(int32_t L, uint64_t KV, int32_t page) {
    return (uint64_t)L * 2 * (uint64_t)page * KV;
}

/* Slots that lie together from slot s of a row (of n): to the end of s's page, or all. */
static int32_t kv_run(const grpo_kv_cache *kv, int32_t s, int32_t n) {
    int32_t run = lm_kv_paged(kv) ? kv->page - s % kv->page : n - s;
    return run < n - s ? run : n - s;
}

void lm_kv_copy_row(const grpo_ops *o, const grpo_kv_cache *kv, uint64_t KV, int32_t L,
                    int32_t dst, int32_t src, int32_t n) {
    if (dst == src || n <= 0) return;
    for (int32_t l = 0; l < L; l++)
        for (int32_t kind = 0; kind < 2; kind++)
            for (int32_t s = 0, run; s < n; s += run) {
                run = kv_run(kv, s, n);
                o->copy(o->ctx, lm_kv_at(kv, KV, L, l, kind, dst, s),
                        lm_kv_at(kv, KV, L, l, kind, src, s), (uint64_t)run * KV * sizeof(float));
            }
}

void lm_kv_store(const grpo_ops *o, const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l,
                 const float *k, const float *v, int32_t B, int32_t T) {
    for (int32_t b = 0; b < B; b++)
        for (int32_t s = 0, run; s < T; s += run) {
            uint64_t at = ((uint64_t)b * T + s) * KV, bytes;
            run = kv_run(kv, s, T), bytes = (uint64_t)run * KV * sizeof(float);
            o->copy(o->ctx, lm_kv_at(kv, KV, L, l, 0, b, s), k + at, bytes);
            o->copy(o->ctx, lm_kv_at(kv, KV, L, l, 1, b, s), v + at, bytes);
        }
}

int32_t lm_prefill_check(const char *who, const grpo_kv_cache *kv, int32_t B, int32_t T,
                         grpo_error *err) {
    if (B <= 0 || T <= 0 || B > kv->R || T > kv->S)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: prefill of (%d,%d) prompts into a cache of %d rows x %d "
                              "slots (expected 0 < B <= rows, 0 < T <= slots)", who, B, T, kv->R,
                              kv->S);
    return GRPO_OK;
}

int32_t lm_prefill_left_padded(const char *who, const int32_t *hmask, int32_t B, int32_t T,
                               grpo_error *err) {
    for (int32_t b = 0; b < B; b++)
        if (!hmask[(size_t)b * T + T - 1])
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: prefill: prompt row %d is not left-padded (its last "
                                  "column is padding)", who, b);
    return GRPO_OK;
}

int32_t lm_decode_lengths(const char *who, const grpo_host *host, const grpo_kv_cache *kv,
                          const int32_t *len, int32_t R, int32_t **hlen, grpo_error *err) {
    const grpo_ops *o = host->ops;
    *hlen = NULL;
    if (R <= 0 || R > kv->R)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: decode of %d rows with a cache of %d rows", who, R, kv->R);
    int32_t *h = host->alloc((uint64_t)R * sizeof(int32_t));
    if (!h) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: decode: out of memory", who);
    o->download(o->ctx, h, len, (uint64_t)R * sizeof(int32_t));
    for (int32_t r = 0; r < R; r++)
        if (h[r] < 1 || h[r] > kv->S) {
            int32_t bad = h[r];
            host->free(h);
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: decode: len[%d] = %d, expected 1..%d (cache slots)", who,
                                  r, bad, kv->S);
        }
    *hlen = h;
    return GRPO_OK;
}

void lm_last_columns(const grpo_ops *o, float *out, const float *x, int32_t B, int32_t T,
                     int32_t C) {
    for (int32_t b = 0; b < B; b++)
        o->copy(o->ctx, out + (uint64_t)b * C, x + ((uint64_t)b * T + T - 1) * C,
                (uint64_t)C * sizeof(float));
}

void lm_logits_forward(const grpo_ops *o, int32_t wtype, float *logits, float *lnf,
                       float *lnf_rstd, const float *x, const float *wnorm, const float *whead,
                       int32_t R, int32_t C, int32_t V, float eps) {
    o->rmsnorm_forward(o->ctx, lnf, lnf_rstd, x, wnorm, R, C, eps);
    lm_weight_matmul(o, wtype, logits, lnf, whead, NULL, R, C, V);
}
