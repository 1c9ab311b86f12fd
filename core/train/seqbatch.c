/* seqbatch.c — (B,T) sequence batches on the backend: rollout rows padded or packed into them,
 * their completion cells, forward and backward (see seqbatch.h). */
#include "train/seqbatch.h"

#include <stdlib.h>
#include <string.h>

static void release(grpo_seqbatch *s) {
    free(s->ids), free(s->mask), free(s->pos), free(s->targets);
    free(s->logp), free(s->entropy), free(s->dlogp), free(s->dentropy);
    free(s->row_col), free(s->row_len);
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
        memset(s, 0, sizeof *s); /* the rows' arrays too: the builders reserve them again */
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
    s->B = B, s->T = T, s->aux_weight = 0.0f, s->shared_prefix = 0, s->kept = 0;
    memset(s->ids, 0, n * sizeof(int32_t));
    memset(s->mask, 0, n * sizeof(int32_t));
    memset(s->dlogp, 0, n * sizeof(float));
    memset(s->dentropy, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) s->targets[i] = -1;
    return GRPO_OK;
}

/* The first position of a segment of row b starting at column t with id: 0, or (a child,
 * GRPO_SEG_CHILD_SHIFT) one past its parent's last position (the parent's last cell before t). */
static int32_t segment_first_pos(const grpo_seqbatch *s, int32_t b, int32_t t, int32_t id) {
    int32_t pid = id >> GRPO_SEG_CHILD_SHIFT;
    const int32_t *mb = s->mask + (size_t)b * s->T, *pb = s->pos + (size_t)b * s->T;
    for (int32_t u = t - 1; u >= 0 && pid; u--)
        if (mb[u] == pid) return pb[u] + 1;
    return 0;
}

void grpo_seqbatch_positions(grpo_seqbatch *s) {
    for (int32_t b = 0; b < s->B; b++) {
        int32_t real = 0, seg = 0;
        for (int32_t t = 0; t < s->T; t++) {
            size_t i = (size_t)b * s->T + t;
            if (s->mask[i] && s->mask[i] != seg)
                seg = s->mask[i], real = segment_first_pos(s, b, t, seg);
            s->pos[i] = s->mask[i] ? real++ : 0;
        }
    }
}

/* Room for the mapping of n rollout rows (row_col, row_len); s->rows = n. */
static int rows_reserve(grpo_seqbatch *s, int32_t n, grpo_error *err) {
    if ((size_t)n > s->rows_cap) {
        free(s->row_col), free(s->row_len);
        s->row_col = malloc((size_t)n * sizeof(int32_t));
        s->row_len = malloc((size_t)n * sizeof(int32_t));
        s->rows_cap = s->row_col && s->row_len ? (size_t)n : 0;
        if (!s->rows_cap)
            return grpo_error_set(err, GRPO_ERR_NOMEM, "batch: out of memory for %d rows", n);
    }
    s->rows = n;
    return GRPO_OK;
}

static grpo_batch device_batch(const grpo_seqbatch *s) {
    grpo_batch b = {sizeof(grpo_batch), s->B,     s->T,         s->d_ids,     s->d_mask,
                    s->d_pos,           s->d_targets, s->aux_weight, s->kept};
    return b;
}

int grpo_seqbatch_forward(grpo_seqbatch *s, grpo_model *m, int want_entropy, float scale,
                          grpo_error *err) {
    const grpo_ops *o = s->ops;
    uint64_t bi = (uint64_t)s->B * s->T * sizeof(int32_t),
             bf = (uint64_t)s->B * s->T * sizeof(float);
    int rc = grpo_model_check_ids(m, s->ids, (size_t)s->B * s->T, "batch", err);
    if (rc == GRPO_OK && !s->kept) rc = grpo_model_reserve_acts(m, s->B, s->T, err);
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

/* Completion of rollout row i from cell at of the batch (ids, mask, targets): its first n tokens
 * (pad_id, mask 0 past r->len[i]) with mask value seg, each target at the cell before it. */
static void put_completion(grpo_seqbatch *s, size_t at, const grpo_rollout *r, int32_t i,
                           int32_t n, int32_t seg, int32_t pad_id) {
    for (int32_t j = 0; j < n; j++) {
        int real = j < r->len[i];
        s->ids[at + j] = real ? r->ids[(size_t)i * r->T + j] : pad_id;
        s->mask[at + j] = real ? seg : 0;
        if (real) s->targets[at + j - 1] = s->ids[at + j];
    }
}

int grpo_seqbatch_from_rollout(grpo_seqbatch *s, const grpo_ops *ops, const int32_t *prompt,
                               const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int32_t T, int32_t pad_id,
                               grpo_error *err) {
    int32_t L = P + T;
    int rc = grpo_seqbatch_reset(s, ops, rows, L, err);
    if (rc == GRPO_OK) rc = rows_reserve(s, rows, err);
    if (rc != GRPO_OK) return rc;
    for (int32_t k = 0; k < rows; k++) {
        int32_t i = r0 + k, b = i / G;
        size_t at = (size_t)k * L;
        memcpy(s->ids + at, prompt + (size_t)b * P, (size_t)P * sizeof(int32_t));
        memcpy(s->mask + at, pmask + (size_t)b * P, (size_t)P * sizeof(int32_t));
        put_completion(s, at + P, r, i, T, 1, pad_id);
        s->row_col[k] = (int32_t)(at + P - 1), s->row_len[k] = T;
    }
    grpo_seqbatch_positions(s);
    s->shared_prefix = P;
    return GRPO_OK;
}

int32_t grpo_seqbatch_row_tokens(const int32_t *pmask, int32_t P, int32_t G,
                                 const grpo_rollout *r, int32_t i) {
    int32_t n = r->len[i];
    for (int32_t p = 0; p < P; p++) n += pmask[(size_t)(i / G) * P + p] != 0;
    return n;
}

/* The real tokens of prompt b (pmask != 0). */
static int32_t prompt_tokens(const int32_t *pmask, int32_t P, int32_t b) {
    int32_t n = 0;
    for (int32_t p = 0; p < P; p++) n += pmask[(size_t)b * P + p] != 0;
    return n;
}

/* Whether rollout row i shares its prompt with row i - 1 in a pack that starts at row r0 (a
 * prompt of one token has nothing to share: its rows stay whole). */
static int shares_prompt(int share, const int32_t *pmask, int32_t P, int32_t G, int32_t r0,
                         int32_t i) {
    return share && i > r0 && i / G == (i - 1) / G && prompt_tokens(pmask, P, i / G) > 1;
}

/* The tokens rollout row i adds to a pack that starts at r0: its row's tokens, or (sharing its
 * prompt with the row before) its completion and the prompt's last token. */
static int64_t pack_cost(const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                         int32_t r0, int32_t i, int share) {
    return shares_prompt(share, pmask, P, G, r0, i) ? 1 + (int64_t)r->len[i]
                                          : grpo_seqbatch_row_tokens(pmask, P, G, r, i);
}

int32_t grpo_seqbatch_pack_fit(const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int64_t K, int share) {
    int64_t n = pack_cost(pmask, P, G, r, r0, r0, share);
    int32_t k = 1;
    while (k < rows && k < GRPO_SEG_MAX - 1 &&
           (n += pack_cost(pmask, P, G, r, r0, r0 + k, share)) <= K)
        k++;
    return k;
}

/* Cells [at, at + n) of the pack: ids, mask value id. */
static void put_cells(grpo_seqbatch *s, size_t at, const int32_t *ids, int32_t n, int32_t id) {
    for (int32_t c = 0; c < n; c++) s->ids[at + (size_t)c] = ids[c], s->mask[at + (size_t)c] = id;
}

int grpo_seqbatch_pack_rollout(grpo_seqbatch *s, const grpo_ops *ops, const int32_t *prompt,
                               const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int share, grpo_error *err) {
    if (rows >= GRPO_SEG_MAX)
        return grpo_error_set(err, GRPO_ERR_INVALID, "batch: a pack of %d rows; at most %d",
                              rows, GRPO_SEG_MAX - 1);
    int64_t n = 0;
    for (int32_t k = 0; k < rows; k++) n += pack_cost(pmask, P, G, r, r0, r0 + k, share);
    int rc = grpo_seqbatch_reset(s, ops, 1, (int32_t)n, err);
    if (rc == GRPO_OK) rc = rows_reserve(s, rows, err);
    if (rc != GRPO_OK) return rc;
    int32_t *real = malloc(((size_t)P + 1) * sizeof(int32_t)); /* the prompt's real tokens */
    if (!real) return grpo_error_set(err, GRPO_ERR_NOMEM, "batch: out of memory for a prompt");
    size_t at = 0;
    for (int32_t k = 0, id = 0, np = 0; k < rows; k++) {
        int32_t i = r0 + k, b = i / G, seg;
        if (!shares_prompt(share, pmask, P, G, r0, i)) { /* the prompt's real tokens, in order */
            np = 0;
            for (int32_t p = 0; p < P; p++)
                if (pmask[(size_t)b * P + p]) real[np++] = prompt[(size_t)b * P + p];
            id++;
            if (share && np > 1) /* the parent: all but the last prompt token */
                put_cells(s, at, real, np - 1, id), at += (size_t)np - 1;
        }
        if (share && np > 1) { /* a child: the prompt's last token, then the completion */
            seg = id << GRPO_SEG_CHILD_SHIFT | (k + 1);
            put_cells(s, at, real + np - 1, 1, seg), at++;
        } else {
            seg = share ? id : k + 1;
            put_cells(s, at, real, np, seg), at += (size_t)np;
        }
        s->row_col[k] = (int32_t)at - 1, s->row_len[k] = r->len[i];
        put_completion(s, at, r, i, r->len[i], seg, 0);
        at += (size_t)r->len[i];
    }
    free(real);
    grpo_seqbatch_positions(s);
    return GRPO_OK;
}

void grpo_seqbatch_completion(const grpo_seqbatch *s, const float *src, int32_t T, float *out) {
    for (int32_t k = 0; k < s->rows; k++) {
        float *o = out + (size_t)k * T;
        int32_t n = s->row_len[k] < T ? s->row_len[k] : T;
        memcpy(o, src + s->row_col[k], (size_t)n * sizeof(float));
        memset(o + n, 0, (size_t)(T - n) * sizeof(float));
    }
}

void grpo_seqbatch_scatter(const grpo_seqbatch *s, const float *src, int32_t T, float *dst) {
    for (int32_t k = 0; k < s->rows; k++) {
        int32_t n = s->row_len[k] < T ? s->row_len[k] : T;
        memcpy(dst + s->row_col[k], src + (size_t)k * T, (size_t)n * sizeof(float));
    }
}

int grpo_seqbatch_aux_loss(grpo_seqbatch *s, const grpo_model *m, double coef, int shares,
                           double *aux) {
    if (!m->desc->aux_loss) return 0;
    *aux = m->desc->aux_loss(m->inst);
    s->aux_weight = (float)(coef / shares);
    return 1;
}
