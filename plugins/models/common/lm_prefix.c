/* lm_prefix.c — the shared-prefix layout of a training pass (see lm_prefix.h). */
#include "lm_prefix.h"

#include <stdlib.h>
#include <string.h>

lm_rows lm_rows_plain(const grpo_batch *b) {
    lm_rows r = {b->B * b->T, b->B, b->T, b->mask, b->pos, 0, 0, NULL};
    return r;
}

int32_t lm_prefix_possible(const grpo_ops *o, const grpo_batch *b, int32_t P,
                           int32_t per_row_stats, int32_t lora_dropout) {
    int32_t ops = grpo_ops_supports(o, prefix_attention_forward) &&
                  grpo_ops_supports(o, prefix_attention_backward) &&
                  grpo_ops_supports(o, gather_rows) && grpo_ops_supports(o, scatter_add_rows);
    return ops && !per_row_stats && !lora_dropout && b->B > 1 && P > 0 && P < b->T;
}

/* Grows the host and device blocks for a (B,T) batch. */
static int32_t reserve(lm_prefix *p, const grpo_ops *o, int32_t B, int32_t T, const char *who,
                       grpo_error *err) {
    uint64_t n = (uint64_t)B * T;
    if (n <= p->cap && (uint64_t)B <= p->capB) return GRPO_OK;
    lm_prefix_free(p, o);
    p->host = malloc((7 * n + (uint64_t)B) * sizeof(int32_t));
    p->dev = o->alloc(o->ctx, (4 * n + (uint64_t)B) * sizeof(int32_t));
    if (!p->host || !p->dev) {
        lm_prefix_free(p, o);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory for the shared-prefix "
                              "layout of a (%d,%d) batch", who, B, T);
    }
    p->cap = n, p->capB = (uint64_t)B;
    return GRPO_OK;
}

/* Rows b and b-1 equal in their first P columns (ids, mask, pos: host (B,T) arrays). */
static int32_t same_prefix(const int32_t *const hb[3], int32_t b, int32_t T, int32_t P) {
    for (int32_t i = 0; i < 3; i++)
        if (memcmp(hb[i] + (size_t)b * T, hb[i] + (size_t)(b - 1) * T,
                   (size_t)P * sizeof(int32_t)))
            return 0;
    return 1;
}

/* Packs the host arrays: hb (the batch's ids mask pos, (B,T)) into pk (ids mask pos, (N')) and
 * idx (B*T); prefix_of (B) given. */
static void pack(int32_t *const pk[3], int32_t *idx, const int32_t *const hb[3],
                 const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP, int32_t P) {
    int32_t Tc = T - P;
    for (int32_t b = 0; b < B; b++) {
        int32_t j = prefix_of[b];
        size_t row = (size_t)b * T, pre = (size_t)j * P, own = (size_t)BP * P + (size_t)b * Tc;
        for (int32_t i = 0; i < 3; i++) {
            memcpy(pk[i] + pre, hb[i] + row, (size_t)P * sizeof(int32_t)); /* same for its rows */
            memcpy(pk[i] + own, hb[i] + row + P, (size_t)Tc * sizeof(int32_t));
        }
        for (int32_t t = 0; t < T; t++)
            idx[row + t] = (int32_t)(t < P ? pre + (size_t)t : own + (size_t)(t - P));
    }
}

int32_t lm_prefix_build(lm_prefix *p, const grpo_ops *o, const grpo_batch *b, int32_t P,
                        const char *who, grpo_error *err) {
    int32_t B = b->B, T = b->T, st = reserve(p, o, B, T, who, err);
    p->active = 0;
    if (st != GRPO_OK) return st;
    uint64_t n = (uint64_t)B * T;
    int32_t *const hb[3] = {p->host, p->host + n, p->host + 2 * n};
    int32_t *const pk[3] = {p->host + 3 * n, p->host + 4 * n, p->host + 5 * n};
    int32_t *hidx = p->host + 6 * n, *hpre = p->host + 7 * n;
    const int32_t *src[3] = {b->ids, b->mask, b->pos};
    for (int32_t i = 0; i < 3; i++) o->download(o->ctx, hb[i], src[i], n * sizeof(int32_t));
    int32_t BP = 0;
    for (int32_t r = 0; r < B; r++) {
        if (r == 0 || !same_prefix((const int32_t *const *)hb, r, T, P)) BP++;
        hpre[r] = BP - 1;
    }
    if (BP == B) return GRPO_OK; /* nothing shared: the plain path */
    pack(pk, hidx, (const int32_t *const *)hb, hpre, B, T, BP, P);
    uint64_t np = (uint64_t)BP * P + (uint64_t)B * (T - P);
    int32_t *dv[4] = {p->dev, p->dev + n, p->dev + 2 * n, p->dev + 3 * n};
    for (int32_t i = 0; i < 3; i++) o->upload(o->ctx, dv[i], pk[i], np * sizeof(int32_t));
    o->upload(o->ctx, dv[3], hidx, n * sizeof(int32_t));
    o->upload(o->ctx, p->dev + 4 * n, hpre, (uint64_t)B * sizeof(int32_t));
    p->rows = (lm_rows){(int32_t)np, B, T - P, dv[1], dv[2], BP, P, p->dev + 4 * n};
    p->ids = dv[0], p->idx = dv[3], p->host_prefix_of = hpre, p->active = 1;
    return GRPO_OK;
}

void lm_prefix_free(lm_prefix *p, const grpo_ops *o) {
    free(p->host);
    if (p->dev) o->free(o->ctx, p->dev);
    p->host = NULL, p->dev = NULL, p->cap = p->capB = 0, p->active = 0;
}
