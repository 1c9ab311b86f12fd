/*
 * rm_score.c — raw reward-model scores of texts: batches of up to batch_size texts, right-padded
 * to their longest (B,T), one host model_hidden call for the hidden state (B,C) at each text's
 * scored column, then the head: raw = head[label] . h, accumulated in double.
 * Padding never changes a score: attention is causal with a padding mask and positions count
 * real tokens only, so a text scores the same alone or in any batch.
 */
#include <math.h>
#include <string.h>

#include "reward_model.h"

/* Scores texts[0..B) (all non-empty) into raw. */
static int32_t score_batch(rm_state *s, const rm_text *const *texts, int32_t B, double *raw,
                           grpo_error *err) {
    int32_t T = 0;
    for (int32_t b = 0; b < B; b++) T = texts[b]->n > T ? texts[b]->n : T;
    int32_t *ids = calloc((size_t)B * T, sizeof *ids), *mask = calloc((size_t)B * T, sizeof *mask);
    int32_t *at = malloc((size_t)B * sizeof *at);
    float *h = malloc((size_t)B * s->C * sizeof *h); /* (B,C) */
    int32_t rc = ids && mask && at && h ? GRPO_OK
                                        : grpo_error_set(err, GRPO_ERR_NOMEM,
                                                         "[%s] out of memory for (%d,%d) tokens",
                                                         s->name, B, T);
    for (int32_t b = 0; rc == GRPO_OK && b < B; b++) {
        memcpy(ids + (size_t)b * T, texts[b]->ids, (size_t)texts[b]->n * sizeof *ids);
        for (int32_t t = 0; t < texts[b]->n; t++) mask[(size_t)b * T + t] = 1;
        at[b] = texts[b]->at;
    }
    if (rc == GRPO_OK) rc = s->host->model_hidden(s->model, ids, mask, B, T, at, h, err);
    const float *w = s->head + (size_t)s->label * s->C; /* (C) */
    for (int32_t b = 0; rc == GRPO_OK && b < B; b++) {
        double acc = 0.0;
        for (int32_t c = 0; c < s->C; c++) acc += (double)w[c] * h[(size_t)b * s->C + c];
        raw[b] = acc;
    }
    free(ids), free(mask), free(at), free(h);
    return rc;
}

int32_t rm_score_texts(rm_state *s, const rm_text *texts, uint32_t n, double *raw,
                       grpo_error *err) {
    const rm_text **batch = malloc((size_t)s->batch_size * sizeof *batch);
    uint32_t *where = malloc((size_t)s->batch_size * sizeof *where);
    double *out = malloc((size_t)s->batch_size * sizeof *out);
    int32_t rc = batch && where && out ? GRPO_OK
                                       : grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory",
                                                        s->name);
    int32_t B = 0;
    for (uint32_t i = 0; rc == GRPO_OK && i <= n; i++) {
        if (i < n && texts[i].n == 0) raw[i] = NAN; /* nothing to score: no opinion */
        else if (i < n) batch[B] = &texts[i], where[B++] = i;
        if (B > 0 && (B == s->batch_size || i == n)) {
            rc = score_batch(s, batch, B, out, err);
            for (int32_t b = 0; rc == GRPO_OK && b < B; b++) raw[where[b]] = out[b];
            B = 0;
        }
    }
    free(batch), free(where), free(out);
    return rc;
}
