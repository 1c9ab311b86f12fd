/* seqbatch.c — (B,T) sequence batches on the backend (see seqbatch.h). */
#include "train/seqbatch.h"

#include <stdlib.h>
#include <string.h>

static void release(grpo_seqbatch *s) {
    free(s->ids), free(s->mask), free(s->pos), free(s->targets);
    free(s->logp), free(s->entropy), free(s->dlogp), free(s->dentropy);
    void *d[] = {s->d_ids,  s->d_mask,    s->d_pos,   s->d_targets,
                 s->d_logp, s->d_entropy, s->d_dlogp, s->d_dentropy};
    for (size_t i = 0; s->ops && i < sizeof d / sizeof d[0]; i++)
        if (d[i]) s->ops->free(s->ops->ctx, d[i]);
}

void grpo_seqbatch_free(grpo_seqbatch *s) {
    release(s);
    memset(s, 0, sizeof *s);
}

int grpo_seqbatch_reset(grpo_seqbatch *s, const grpo_ops *ops, int32_t B, int32_t T,
                        grpo_error *err) {
    size_t n = (size_t)B * T;
    if (n > s->cap || s->ops != ops) {
        release(s);
        memset(s, 0, sizeof *s);
        s->ops = ops, s->cap = n;
        uint64_t bi = n * sizeof(int32_t), bf = n * sizeof(float);
        s->ids = malloc(bi), s->mask = malloc(bi), s->pos = malloc(bi), s->targets = malloc(bi);
        s->logp = malloc(bf), s->entropy = malloc(bf), s->dlogp = malloc(bf);
        s->dentropy = malloc(bf);
        s->d_ids = ops->alloc(ops->ctx, bi), s->d_mask = ops->alloc(ops->ctx, bi);
        s->d_pos = ops->alloc(ops->ctx, bi), s->d_targets = ops->alloc(ops->ctx, bi);
        s->d_logp = ops->alloc(ops->ctx, bf), s->d_entropy = ops->alloc(ops->ctx, bf);
        s->d_dlogp = ops->alloc(ops->ctx, bf), s->d_dentropy = ops->alloc(ops->ctx, bf);
        if (!s->ids || !s->mask || !s->pos || !s->targets || !s->logp || !s->entropy || !s->dlogp ||
            !s->dentropy || !s->d_ids || !s->d_mask || !s->d_pos || !s->d_targets || !s->d_logp ||
            !s->d_entropy || !s->d_dlogp || !s->d_dentropy) {
            grpo_seqbatch_free(s);
            return grpo_error_set(err, GRPO_ERR_NOMEM, "batch: out of memory for (%d,%d)", B, T);
        }
    }
    s->B = B, s->T = T, s->aux_weight = 0.0f, s->shared_prefix = 0;
    memset(s->ids, 0, n * sizeof(int32_t));
    memset(s->mask, 0, n * sizeof(int32_t));
    memset(s->dlogp, 0, n * sizeof(float));
    memset(s->dentropy, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) s->targets[i] = -1;
    return GRPO_OK;
}

void grpo_seqbatch_positions(grpo_seqbatch *s) {
    for (int32_t b = 0; b < s->B; b++) {
        int32_t real = 0;
        for (int32_t t = 0; t < s->T; t++) {
            size_t i = (size_t)b * s->T + t;
            s->pos[i] = s->mask[i] ? real++ : 0;
        }
    }
}

static grpo_batch device_batch(const grpo_seqbatch *s) {
    grpo_batch b = {sizeof(grpo_batch), s->B,     s->T,         s->d_ids,
                    s->d_mask,          s->d_pos, s->d_targets, s->aux_weight};
    return b;
}

int grpo_seqbatch_forward(grpo_seqbatch *s, grpo_model *m, int want_entropy, float scale,
                          grpo_error *err) {
    const grpo_ops *o = s->ops;
    uint64_t bi = (uint64_t)s->B * s->T * sizeof(int32_t),
             bf = (uint64_t)s->B * s->T * sizeof(float);
    int rc = grpo_model_check_ids(m, s->ids, (size_t)s->B * s->T, "batch", err);
    if (rc == GRPO_OK) rc = grpo_model_reserve_acts(m, s->B, s->T, err);
    if (rc == GRPO_OK) rc = grpo_model_set_shared_prefix(m, s->shared_prefix, err);
    if (rc != GRPO_OK) return rc;
    o->upload(o->ctx, s->d_ids, s->ids, bi);
    o->upload(o->ctx, s->d_mask, s->mask, bi);
    o->upload(o->ctx, s->d_pos, s->pos, bi);
    o->upload(o->ctx, s->d_targets, s->targets, bi);
    grpo_batch b = device_batch(s);
    rc = grpo_model_forward(m, &b, s->d_logp, want_entropy ? s->d_entropy : NULL, scale, err);
    if (rc != GRPO_OK) return rc;
    o->download(o->ctx, s->logp, s->d_logp, bf);
    if (want_entropy) o->download(o->ctx, s->entropy, s->d_entropy, bf);
    return GRPO_OK;
}

int grpo_seqbatch_backward(grpo_seqbatch *s, grpo_model *m, int with_entropy, float scale,
                           grpo_error *err) {
    const grpo_ops *o = s->ops;
    uint64_t bf = (uint64_t)s->B * s->T * sizeof(float);
    o->upload(o->ctx, s->d_dlogp, s->dlogp, bf);
    grpo_batch b = device_batch(s);
    if (!with_entropy) return grpo_model_backward(m, &b, s->d_dlogp, scale, err);
    o->upload(o->ctx, s->d_dentropy, s->dentropy, bf);
    return grpo_model_backward_entropy(m, &b, s->d_dlogp, s->d_dentropy, s->d_entropy, scale,
                                       err);
}

int grpo_seqbatch_from_rollout(grpo_seqbatch *s, const grpo_ops *ops, const int32_t *prompt,
                               const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int32_t T, int32_t pad_id,
                               grpo_error *err) {
    int32_t L = P + T;
    int rc = grpo_seqbatch_reset(s, ops, rows, L, err);
    if (rc != GRPO_OK) return rc;
    for (int32_t k = 0; k < rows; k++) {
        int32_t i = r0 + k, b = i / G;
        int32_t *ids = s->ids + (size_t)k * L, *mask = s->mask + (size_t)k * L;
        int32_t *tg = s->targets + (size_t)k * L;
        memcpy(ids, prompt + (size_t)b * P, (size_t)P * sizeof(int32_t));
        memcpy(mask, pmask + (size_t)b * P, (size_t)P * sizeof(int32_t));
        for (int32_t j = 0; j < T; j++) {
            int real = j < r->len[i];
            ids[P + j] = real ? r->ids[(size_t)i * r->T + j] : pad_id;
            mask[P + j] = real;
            if (real) tg[P - 1 + j] = ids[P + j];
        }
    }
    grpo_seqbatch_positions(s);
    s->shared_prefix = P;
    return GRPO_OK;
}

void grpo_seqbatch_completion(const grpo_seqbatch *s, const float *src, int32_t P, int32_t T,
                              float *out) {
    for (int32_t k = 0; k < s->B; k++)
        memcpy(out + (size_t)k * T, src + (size_t)k * s->T + P - 1, (size_t)T * sizeof(float));
}

int grpo_seqbatch_aux_loss(grpo_seqbatch *s, const grpo_model *m, double coef, int shares,
                           double *aux) {
    if (!m->desc->aux_loss) return 0;
    *aux = m->desc->aux_loss(m->inst);
    s->aux_weight = (float)(coef / shares);
    return 1;
}
