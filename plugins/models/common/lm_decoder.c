/*
 * lm_decoder.c — the decoder skeleton (see lm_decoder.h): the activation layout, the layer loop
 * of every pass, and the descriptor slots built on them. The pack's feed-forward half is called
 * through d->arch; everything else (embedding, attention, final norm, head, KV cache) is here,
 * so both packs issue the same op calls in the same order.
 */
#include "lm_decoder.h"

#include <stdlib.h>
#include <string.h>

#include "lm_infer.h"

int32_t lm_decoder_init(lm_decoder *d, const char *who, const grpo_host *host,
                        lm_attn_config *attn, int32_t L, int32_t V, const lm_arch *arch,
                        grpo_error *err) {
    d->who = who, d->host = host, d->ops = host->ops;
    d->attn = attn, d->L = L, d->V = V, d->arch = arch;
    attn->lin = &d->lin;
    d->w = calloc((size_t)L, sizeof *d->w);
    if (!d->w) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", who);
    return GRPO_OK;
}

void lm_decoder_free(lm_decoder *d) {
    free(d->keep.prefix_of), free(d->keep.steps), free(d->keep.la), free(d->keep.moves);
    d->keep = (lm_keep){0};
    lm_lora_free(&d->lin.lora);
    if (d->ops) lm_prefix_free(&d->pfx, d->ops);
    lm_params_free(&d->pt);
    free(d->w), free(d->params);
    d->w = NULL, d->params = NULL;
}

/* ---- parameters ---------------------------------------------------------------------------- */

int32_t lm_decoder_params_build(lm_decoder *d, uint32_t per_layer, const char *embed,
                                int32_t (*add_layer)(lm_decoder *d, int32_t l),
                                int32_t (*add_head)(lm_decoder *d), grpo_error *err) {
    int32_t st = lm_params_alloc(&d->pt, 3 + (uint32_t)d->L * per_layer, d->who, err);
    if (st != GRPO_OK) return st;
    st = lm_params_add_embed(&d->pt, embed, d->V, d->attn->C);
    for (int32_t l = 0; l < d->L && st == GRPO_OK; l++) st = add_layer(d, l);
    if (st == GRPO_OK) st = lm_params_add_norm(&d->pt, d->attn->C);
    if (st == GRPO_OK) st = add_head(d);
    if (st != GRPO_OK)
        return grpo_error_set(err, st, "%s: out of memory for the parameter names", d->who);
    return GRPO_OK;
}

int32_t lm_decoder_add_attn(lm_decoder *d, int32_t l) {
    int32_t st = GRPO_OK;
    for (int32_t s = 0; s < AP_COUNT && st == GRPO_OK; s++) {
        int64_t shape[2] = {0, 0};
        int32_t nd = lm_attn_param_shape(d->attn, s, shape);
        if (nd)
            st = lm_params_add_layer(&d->pt, l, lm_attn_param_names[s], nd, shape, s,
                                     lm_attn_param_inits[s]);
    }
    return st;
}

/* ---- activations ----------------------------------------------------------------------------- */

/* Places (a != NULL) or only counts the top-level tensors; returns the floats used. */
static uint64_t top_layout(const lm_decoder *d, lm_decoder_acts *a, float *block, uint64_t N,
                           int32_t train) {
    uint64_t C = d->attn->C, used = 0;
#define PLACE(f, sz) ((a ? (void)(a->f = block + used) : (void)0), used += lm_padded(sz))
    PLACE(xL, N * C);
    PLACE(lnf, N * C);
    PLACE(lnf_rstd, N);
    PLACE(head_lse, N);
    PLACE(tmp, N * C);
    if (!train) return used;
    PLACE(dx, N * C);
    PLACE(dh, N * C);
#undef PLACE
    if (d->arch->grads_layout)
        used += d->arch->grads_layout(d, a ? d->grads : NULL, a ? block + used : NULL, N);
    if (a) lm_attn_grads_carve(&a->ag, block + used, d->attn, N);
    return used + lm_attn_grads_floats(d->attn, N);
}

/* One set of layer buffers serves all L layers: forward only, or training with recomputation. */
static int32_t shared_layers(const lm_decoder *d, int32_t train) {
    return !train || d->recompute;
}

/* Floats of the tensors of parts (LM_ACTS_*) of one layer: the attention block's and the pack's. */
static uint64_t layer_floats(const lm_decoder *d, uint64_t N, int32_t parts) {
    return lm_attn_acts_floats(d->attn, N, parts) + d->arch->layer_layout(d, NULL, NULL, N, parts);
}

/* Points the tensors of parts of the layer struct la at p; returns the end. */
static float *carve_layer(const lm_decoder *d, void *la, float *p, uint64_t N, int32_t parts) {
    p = lm_attn_acts_carve(la, p, d->attn, N, parts);
    return p + d->arch->layer_layout(d, la, p, N, parts);
}

uint64_t lm_decoder_acts_floats(const lm_decoder *d, int32_t B, int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T, L = (uint64_t)d->L;
    uint64_t layers; /* shared: one set (train: + the kept inputs); else kept per layer */
    if (shared_layers(d, train))
        layers = layer_floats(d, N, LM_ACTS_ALL) + (train ? L * lm_padded(N * d->attn->C) : 0);
    else
        layers = layer_floats(d, N, LM_ACTS_REDONE) + L * layer_floats(d, N, LM_ACTS_KEPT);
    return layers + top_layout(d, NULL, NULL, N, train);
}

/* lm_decoder_acts_carve with the layer structs in la ([L] of layer_size bytes). */
static void carve_into(lm_decoder *d, lm_decoder_acts *a, void *la, float *block, int32_t B,
                       int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T;
    int32_t shared = shared_layers(d, train);
    *a = (lm_decoder_acts){0};
    a->l = la;
    a->ffn = train ? d->grads : NULL;
    float *redone = block, *p = shared ? block : block + layer_floats(d, N, LM_ACTS_REDONE);
    for (int32_t l = 0; l < d->L; l++) {
        lm_attn_acts *la = lm_decoder_layer(d, a, l);
        if (shared && l > 0) { /* every layer reuses layer 0's buffers */
            memcpy(la, a->l, d->layer_size);
            continue;
        }
        memset(la, 0, d->layer_size);
        if (!shared) carve_layer(d, la, redone, N, LM_ACTS_REDONE); /* the same for every layer */
        p = carve_layer(d, la, p, N, shared ? LM_ACTS_ALL : LM_ACTS_KEPT);
    }
    if (train && d->recompute) { /* each layer's input apart; the shared x: recomputed outputs */
        a->xr = lm_decoder_layer(d, a, 0)->x;
        for (int32_t l = 0; l < d->L; l++, p += lm_padded(N * d->attn->C))
            lm_decoder_layer(d, a, l)->x = p;
    }
    top_layout(d, a, p, N, train);
}

void lm_decoder_acts_carve(lm_decoder *d, lm_decoder_acts *a, float *block, int32_t B,
                           int32_t T, int32_t train) {
    carve_into(d, a, d->la, block, B, T, train);
}

/* ---- checks ---------------------------------------------------------------------------------- */

/* bind() done. */
static int32_t check_bound(const lm_decoder *d, const char *what, grpo_error *err) {
    if (d->bound) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s before bind", d->who, what);
}

/* An LM head, for the passes that produce log-probs or logits (classifiers have hidden()). */
static int32_t check_lm_head(const lm_decoder *d, const char *what, grpo_error *err) {
    if (!d->classifier) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "%s: %s needs an LM head, but this is a %s model (it has %s and serves "
                          "hidden states only)", d->who, what, d->classifier,
                          d->classifier_tensor);
}

/* A (B,T) batch of a full-sequence pass: not empty, and within exact RoPE. */
static int32_t check_batch(const lm_decoder *d, const char *what, int32_t B, int32_t T,
                           grpo_error *err) {
    if (B <= 0 || T <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s: empty batch (%d,%d)", d->who, what,
                              B, T);
    if (d->rope_max > 0 && T > d->rope_max)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: %d tokens exceed max_position_embeddings (%d), past which "
                              "dynamic NTK RoPE scaling (not implemented) applies", d->who, T,
                              d->rope_max);
    return GRPO_OK;
}

/* The prompt mask (B,T) must be left-padded: downloaded and checked on the host. */
static int32_t check_left_padded(const lm_decoder *d, const int32_t *mask, int32_t B, int32_t T,
                                 grpo_error *err) {
    const grpo_ops *o = d->ops;
    int32_t *hmask = d->host->alloc((uint64_t)B * T * sizeof(int32_t));
    if (!hmask) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: prefill: out of memory", d->who);
    o->download(o->ctx, hmask, mask, (uint64_t)B * T * sizeof(int32_t));
    int32_t st = lm_prefill_left_padded(d->who, hmask, B, T, err);
    d->host->free(hmask);
    return st;
}

/* ---- the layer loops ------------------------------------------------------------------------- */

/* Floats of one cache slot of one layer: NKV*HD. */
static uint64_t kv_width(const lm_decoder *d) { return (uint64_t)d->attn->NKV * d->attn->HD; }

/* out (N,C) = the embedding rows of ids (N), as the embedding is held. */
static void embed(const lm_decoder *d, float *out, const int32_t *ids, int32_t N) {
    const grpo_ops *o = d->ops;
    if (d->lin.wtype == GRPO_DTYPE_F32)
        o->embedding_forward(o->ctx, out, ids, d->wte, N, d->attn->C);
    else
        o->embedding_forward_w(o->ctx, out, ids, d->wte, d->lin.wtype, N, d->attn->C);
}

/* ---- rollout keep (lm_keep) -------------------------------------------------------------- */

/* Where a prefill or decode call keeps its tokens: n tokens from token 0 (prefill: the prefix
 * rows), or decode row r at token idx[r] (-1: nowhere) of the R rows. */
typedef struct keep_at {
    const int64_t *idx;
    uint64_t n;
    int32_t R;
} keep_at;

/* One kept tensor in the keep's layout and in the batch's (w floats a token). */
typedef struct kept_move {
    float *from, *to;
    uint64_t w;
} kept_move;

/* A tensor of a layer struct (or of lm_decoder_acts) by its offset. */
static float *tensor_at(const void *s, size_t off) {
    return *(float *const *)((const char *)s + off);
}

/* Decode row r (width w) of src into its token at->idx[r] of dst (-1: nowhere). */
static void keep_row(const grpo_ops *o, float *dst, const float *src, uint64_t w,
                     const keep_at *at, int32_t r) {
    if (at->idx[r] >= 0)
        o->copy(o->ctx, dst + (uint64_t)at->idx[r] * w, src + (uint64_t)r * w,
                w * sizeof(float));
}

/* dst (tokens of width w) <- src (the call's tokens) as at says. */
static void keep_rows(const lm_decoder *d, float *dst, const float *src, uint64_t w,
                      const keep_at *at) {
    const grpo_ops *o = d->ops;
    if (!at->idx) {
        o->copy(o->ctx, dst, src, at->n * w * sizeof(float));
        return;
    }
    for (int32_t r = 0; r < at->R; r++) keep_row(o, dst, src, w, at, r);
}

/* keep_layer's decode rows on the backend's threads: item = tensor (from i0) x row. */
typedef struct keep_job {
    const lm_decoder *d;
    const char *kl; /* the keep's layer struct */
    const void *la; /* the call's */
    const keep_at *at;
    int32_t i0;
} keep_job;

static void keep_item(void *arg, int64_t item, int32_t part) {
    (void)part;
    const keep_job *j = arg;
    const lm_kept *t = &j->d->keep.kept[j->i0 + item / j->at->R];
    keep_row(j->d->ops, tensor_at(j->kl, t->off), tensor_at(j->la, t->off), t->width, j->at,
             (int32_t)(item % j->at->R));
}

/* The kept tensors [i0, i1) of layer l from the call's layer struct la into the keep's. A
 * decode step's rows go to tokens far apart (one per completion): many small copies, split
 * over the backend's threads when it has parallel_for (ABI 1.12). */
static void keep_layer(const lm_decoder *d, const void *la, int32_t l, int32_t i0, int32_t i1,
                       const keep_at *at) {
    const lm_keep *k = &d->keep;
    const char *kl = (const char *)k->la + (size_t)l * d->layer_size;
    if (at->idx && i1 > i0 && grpo_ops_supports(d->ops, parallel_for)) {
        keep_job j = {d, kl, la, at, i0};
        d->ops->parallel_for(d->ops->ctx, (int64_t)(i1 - i0) * at->R, (double)d->attn->C,
                             keep_item, &j);
        return;
    }
    for (int32_t i = i0; i < i1; i++)
        keep_rows(d, tensor_at(kl, k->kept[i].off), tensor_at(la, k->kept[i].off),
                  k->kept[i].width, at);
}

/* The kept token of each of R decode rows (host, R; NULL: out of memory): row_of[r]'s
 * completion token hlen[r] - 1 - P, or -1 (no row, or past Tc); steps updated. */
static int64_t *keep_tokens(lm_decoder *d, const int32_t *hlen, int32_t R) {
    lm_keep *k = &d->keep;
    int64_t *idx = d->host->alloc((uint64_t)R * sizeof *idx);
    if (!idx) return NULL;
    int32_t adapted = lm_lora_adapted_rows(&d->lin.lora, R); /* the base's rows: not kept */
    for (int32_t r = 0; r < R; r++) {
        int32_t b = r < adapted ? k->k.row_of[r] : -1, s = hlen[r] - 1 - k->k.P;
        idx[r] = -1;
        if (b < 0 || b >= k->k.B || s < 0 || s >= k->k.Tc) continue;
        idx[r] = (int64_t)k->k.BP * k->k.P + (int64_t)b * k->k.Tc + s;
        if (s + 1 > k->steps[b]) k->steps[b] = s + 1;
    }
    return idx;
}

/* Embedding + all layers over the tokens of rows (ids (rows->N)): fills the layers of a and
 * a->xL. When kv is not NULL (prefill, plain rows), each layer's rotated keys and values go to
 * cache rows 0..B-1, slots 0..T-1. begin() (a pack's per-row statistics) sees plain rows only
 * (lm_prefix_possible). */
static int32_t body_forward(lm_decoder *d, lm_decoder_acts *a, const int32_t *ids,
                            const lm_rows *rows, const grpo_kv_cache *kv, const keep_at *at,
                            grpo_error *err) {
    const grpo_ops *o = d->ops;
    const lm_arch *h = d->arch;
    int32_t N = rows->N;
    int32_t st = h->begin ? h->begin(d, rows->mask, rows->B, rows->T, err) : GRPO_OK;
    if (st != GRPO_OK) return st;
    embed(d, lm_decoder_layer(d, a, 0)->x, ids, N);
    for (int32_t l = 0; l < d->L && st == GRPO_OK; l++) {
        lm_attn_acts *la = lm_decoder_layer(d, a, l);
        float *out = l + 1 < d->L ? lm_decoder_layer(d, a, l + 1)->x : a->xL;
        lm_attn_forward(o, d->attn, la, a->tmp, d->w[l].p, rows);
        if (kv) lm_kv_store(o, kv, kv_width(d), d->L, l, la->k, la->v, rows->B, rows->T);
        if (at) keep_layer(d, la, l, 0, d->keep.n_attn, at); /* before out overwrites x */
        st = h->forward(d, out, la, a->tmp, l, N, err);
        if (at && st == GRPO_OK) keep_layer(d, la, l, d->keep.n_attn, d->keep.n, at);
    }
    if (at && st == GRPO_OK) keep_rows(d, d->keep.top.xL, a->xL, (uint64_t)d->attn->C, at);
    if (st == GRPO_OK && h->end) h->end(d);
    return st;
}

/* One decode step of R rows (tokens (R)) through every layer: a->xL (R,C). */
static int32_t body_decode(lm_decoder *d, lm_decoder_acts *a, const grpo_kv_cache *kv, int32_t R,
                           const int32_t *tokens, const int32_t *pos, const int32_t *cache_mask,
                           const int32_t *len, const int32_t *hlen, const keep_at *at,
                           grpo_error *err) {
    const grpo_ops *o = d->ops;
    const lm_arch *h = d->arch;
    uint64_t KV = kv_width(d);
    int32_t st = h->begin ? h->begin(d, NULL, R, 1, err) : GRPO_OK;
    if (st != GRPO_OK) return st;
    embed(d, lm_decoder_layer(d, a, 0)->x, tokens, R);
    for (int32_t l = 0; l < d->L && st == GRPO_OK; l++) {
        lm_attn_acts *la = lm_decoder_layer(d, a, l);
        float *out = l + 1 < d->L ? lm_decoder_layer(d, a, l + 1)->x : a->xL;
        lm_kv_layer kl = lm_kv_layer_of(kv, KV, d->L, l);
        lm_attn_decode(o, d->attn, la, a->tmp, d->w[l].p, &kl, pos, cache_mask, len, hlen, R);
        if (at) keep_layer(d, la, l, 0, d->keep.n_attn, at);
        st = h->forward(d, out, la, a->tmp, l, R, err);
        if (at && st == GRPO_OK) keep_layer(d, la, l, d->keep.n_attn, d->keep.n, at);
    }
    if (at && st == GRPO_OK) keep_rows(d, d->keep.top.xL, a->xL, (uint64_t)d->attn->C, at);
    if (st == GRPO_OK && h->end) h->end(d);
    return st;
}

/* out (BT,C) = norm(a->xL) in the (B,T) layout of the rows' batch: packed rows are normed in
 * a->tmp and gathered back (lm_prefix.h). */
static void final_norm(const lm_decoder *d, lm_decoder_acts *a, const lm_rows *rows, int32_t BT,
                       float *out) {
    const grpo_ops *o = d->ops;
    int32_t C = d->attn->C;
    o->rmsnorm_forward(o->ctx, rows->BP ? a->tmp : out, a->lnf_rstd, a->xL, d->wnorm, rows->N, C,
                       d->attn->eps);
    if (rows->BP) o->gather_rows(o->ctx, out, a->tmp, d->pfx.idx, BT, C);
}

/* The batch through the body (over rows, ids) and the final norm: out (B,T,C) = norm(x_L) (out
 * NULL: a->lnf), a carved from block (train: the training layout). */
static int32_t normed_forward(lm_decoder *d, lm_decoder_acts *a, const grpo_batch *batch,
                              const lm_rows *rows, const int32_t *ids, float *block,
                              int32_t train, float *out, grpo_error *err) {
    int32_t B = batch->B, T = batch->T;
    lm_decoder_acts_carve(d, a, block, B, T, train);
    int32_t st = body_forward(d, a, ids, rows, NULL, NULL, err);
    if (st != GRPO_OK) return st;
    final_norm(d, a, rows, B * T, out ? out : a->lnf);
    return GRPO_OK;
}

/* The layout of a training forward over batch: packed when the backend, the pack and the batch
 * allow it (lm_prefix.h), else plain; *ids: the tokens' ids in that layout. */
static int32_t training_rows(lm_decoder *d, const grpo_batch *b, lm_rows *rows,
                             const int32_t **ids, grpo_error *err) {
    d->pfx.active = 0;
    if (lm_prefix_possible(d->ops, b, d->share_P, d->arch->begin != NULL,
                           lm_lora_drops(&d->lin.lora))) {
        int32_t st = lm_prefix_build(&d->pfx, d->ops, b, d->share_P, d->who, err);
        if (st != GRPO_OK) return st;
    }
    *rows = d->pfx.active ? d->pfx.rows : lm_rows_plain(b);
    *ids = d->pfx.active ? d->pfx.ids : b->ids;
    return GRPO_OK;
}

/* Final norm + head on R rows of x (R,C): logits (R,V). */
static void logits_forward(const lm_decoder *d, float *logits, lm_decoder_acts *a,
                           const float *x, int32_t R) {
    lm_logits_forward(d->ops, d->lin.wtype, logits, a->lnf, a->lnf_rstd, x, d->wnorm, d->whead,
                      R, d->attn->C, d->V, d->attn->eps);
}

/* ---- descriptor slots ------------------------------------------------------------------------ */

uint32_t lm_decoder_n_params(void *model) { return ((lm_decoder *)model)->pt.n; }

int32_t lm_decoder_param(void *model, uint32_t i, grpo_param_desc *out) {
    return lm_params_get(&((lm_decoder *)model)->pt, i, out);
}

/* The weights' dtype from bind_typed's dtypes (NULL: all fp32): 1-D tensors (norms, biases)
 * fp32, every other one the same dtype (lm_linear.wtype), which the backend can compute with,
 * and no gradient for a tensor that is not fp32. */
static int32_t weight_dtype(lm_decoder *d, const int32_t *dtypes, float *const *grads,
                            grpo_error *err) {
    const lm_param_table *t = &d->pt;
    int32_t w = -1;
    for (uint32_t i = 0; dtypes && i < t->n; i++) {
        int32_t dt = dtypes[i];
        int32_t ok = t->descs[i].ndim == 1 ? dt == GRPO_DTYPE_F32 : w < 0 || dt == w;
        const char *name = dt == GRPO_DTYPE_F32    ? "fp32"
                           : dt == GRPO_DTYPE_BF16 ? "bf16"
                                                   : "an unknown dtype";
        if (!ok || !lm_linear_supports(d->ops, dt) || (dt != GRPO_DTYPE_F32 && grads && grads[i]))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "%s: bind: %s held as %s: this pack computes fp32 1-D "
                                  "tensors, one dtype for all the others (fp32, or bf16 when the "
                                  "%s backend has the 1.5 typed ops), and trains fp32 only",
                                  d->who, t->names[i], name, d->ops->name);
        if (t->descs[i].ndim > 1) w = dt;
    }
    d->lin.wtype = w < 0 ? GRPO_DTYPE_F32 : w;
    return GRPO_OK;
}

/* bind() and bind_typed(): points the slots at the host's block. grads may be NULL (frozen). */
static int32_t bind(lm_decoder *d, void *const *params, const int32_t *dtypes,
                    float *const *grads, grpo_error *err) {
    const lm_param_table *t = &d->pt;
    int32_t st = weight_dtype(d, dtypes, grads, err);
    if (st != GRPO_OK) return st;
    if (!d->params && !(d->params = calloc(t->n ? t->n : 1, sizeof *d->params)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: bind: out of memory", d->who);
    for (uint32_t i = 0; i < t->n; i++) {
        float *p = params[i], *g = grads ? grads[i] : NULL; /* p: dtypes[i] elements */
        d->params[i] = p;
        if (!p)
            return grpo_error_set(err, GRPO_ERR_INVALID, "%s: bind: no storage for %s", d->who,
                                  t->names[i]);
        switch (t->slot[i]) {
        case LM_SLOT_EMBED: d->wte = p, d->dwte = g; break;
        case LM_SLOT_NORM: d->wnorm = p, d->dwnorm = g; break;
        case LM_SLOT_HEAD: d->whead = p, d->dwhead = g; break;
        default: d->arch->bind(d, t->slot[i], t->layer[i], p, g);
        }
    }
    d->bound = 1;
    return GRPO_OK;
}

int32_t lm_decoder_bind(void *model, float *const *params, float *const *grads,
                        grpo_error *err) {
    return bind(model, (void *const *)params, NULL, grads, err);
}

int32_t lm_decoder_bind_typed(void *model, void *const *params, const int32_t *dtypes,
                              float *const *grads, grpo_error *err) {
    return bind(model, params, dtypes, grads, err);
}

/* A bound instance whose pass has nothing to differentiate: no parameter gradients, and no
 * enabled LoRA adapters that train (a LoRA policy's reference pass has them disabled). Its
 * forward keeps the layout of a forward-only pass (one set of layer buffers for all layers, no
 * gradient buffers): the same ops in the same order, so the same bits, in a fraction of the
 * training block (a sixth at the MiniMind2-small shape), so that a frozen forward's row chunks
 * (core/host/model_instance.h) hold whole groups and share their prompt. */
static int32_t frozen(const lm_decoder *d) {
    return d->bound && !d->dwte && !(lm_lora_active(&d->lin.lora) && lm_lora_trains(&d->lin.lora));
}

uint64_t lm_decoder_activation_floats(void *model, int32_t B, int32_t T) {
    return lm_decoder_acts_floats(model, B, T, !frozen(model));
}

/* grpo_rollout_keep.written (1.11), or NULL (a 1.10 host's keep: this instance writes it). */
static const int32_t *keep_written(const grpo_rollout_keep *k) {
    return GRPO_HAS_FIELD(k, grpo_rollout_keep, written) ? k->written : NULL;
}

/* Whether keep's fields describe a batch: sizes, and prefix_of runs 0, 1, .. BP-1 over
 * consecutive rows (row_of: only for a keep this instance writes). */
static int32_t keep_valid(const grpo_rollout_keep *k) {
    if (k->struct_size < offsetof(grpo_rollout_keep, row_of) + sizeof k->row_of || !k->acts ||
        !k->prefix_of || (!k->row_of && !keep_written(k)) || k->B <= 0 || k->P <= 0 ||
        k->Tc <= 0 || k->BP <= 0 || k->BP > k->B || k->prefix_of[0] != 0)
        return 0;
    for (int32_t b = 1; b < k->B; b++) {
        int32_t step = k->prefix_of[b] - k->prefix_of[b - 1];
        if (step != 0 && step != 1) return 0;
    }
    return k->prefix_of[k->B - 1] == k->BP - 1;
}

/* The kept lists cover every kept tensor of a layer: for 16 tokens (no padding) the layout's
 * kept floats are 16 x the listed widths, plus att (Q) and att_lse (NH), which the forward
 * computes again. */
static int32_t keep_covers(const lm_decoder *d, const lm_keep *k) {
    uint64_t w = (uint64_t)d->attn->NH * d->attn->HD + (uint64_t)d->attn->NH;
    for (int32_t i = 0; i < k->n; i++) w += k->kept[i].width;
    return layer_floats(d, 16, LM_ACTS_KEPT) == 16 * w;
}

/* Why this instance cannot keep a rollout (written: taking one another instance wrote), or
 * NULL. A frozen instance (a rollout copy) may write one for another instance's forward. */
static const char *keep_refused(const lm_decoder *d, const int32_t *written) {
    if (!d->bound) return "before bind";
    if (frozen(d) && written) return "on a frozen instance (it has no training forward)";
    if (!d->arch->kept) return "in this pack";
    if (d->recompute) return "with gradient checkpointing";
    return NULL;
}

int32_t lm_decoder_keep_rollout(void *model, const grpo_rollout_keep *keep, grpo_error *err) {
    lm_decoder *d = model;
    lm_keep *k = &d->keep;
    k->on = 0;
    if (!keep) return GRPO_OK;
    const char *why = keep_refused(d, keep_written(keep));
    if (why)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%s: keep_rollout: not available %s",
                              d->who, why);
    if (!keep_valid(keep))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: keep_rollout: bad batch (B %d, P %d, Tc %d, BP %d; prefix_of "
                              "must run 0 .. BP-1 over consecutive rows)", d->who, keep->B,
                              keep->P, keep->Tc, keep->BP);
    k->n_attn = lm_attn_kept(d->attn, k->kept);
    k->n = k->n_attn + d->arch->kept(d, k->kept + k->n_attn);
    if (!keep_covers(d, k))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: keep_rollout: the pack's kept tensors are not all listed",
                              d->who);
    int32_t *pre = realloc(k->prefix_of, (size_t)keep->B * sizeof *pre);
    if (pre) k->prefix_of = pre;
    int32_t *steps = pre ? realloc(k->steps, (size_t)keep->B * sizeof *steps) : NULL;
    if (steps) k->steps = steps;
    void *la = k->la ? k->la : calloc((size_t)d->L, d->layer_size);
    if (la) k->la = la;
    void *mv = realloc(k->moves, ((size_t)d->L * (size_t)k->n + 1) * sizeof(kept_move));
    if (mv) k->moves = mv;
    if (!pre || !steps || !la || !mv)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: keep_rollout: out of memory", d->who);
    k->k = *keep;
    memcpy(k->prefix_of, keep->prefix_of, (size_t)keep->B * sizeof *pre);
    const int32_t *written = keep_written(keep);
    k->adopted = written != NULL;
    for (int32_t b = 0; b < keep->B; b++) { /* what another instance wrote, or nothing yet */
        int32_t w = written ? written[b] : 0;
        k->steps[b] = w < 0 ? 0 : w > keep->Tc ? keep->Tc : w;
    }
    carve_into(d, &k->top, k->la, keep->acts, keep->B, keep->P + keep->Tc, 1);
    k->lora = lm_lora_active(&d->lin.lora);
    k->on = 1;
    return GRPO_OK;
}

/* A pass of the base model under its LoRA adapters, switched off (the KL reference of a LoRA
 * run): it reads only the frozen base weights, so a rollout of the adapted model kept before
 * it is still the one the next training forward would compute. Every other pass drops it. */
static int32_t base_pass(const lm_decoder *d) {
    return d->lin.lora.n > 0 && !d->lin.lora.enabled;
}

/* grpo_batch.kept (1.10); 0 from an older host. */
static int32_t batch_kept(const grpo_batch *b) {
    return b->struct_size >= offsetof(grpo_batch, kept) + sizeof(int32_t) && b->kept;
}

/* The kept rollout is this forward's: the block, the rows, the prompts' columns and their
 * packed layout (the prompts' rows, each row's prompt) are those keep_rollout was armed with,
 * and the completion columns are at most the keep's and hold every kept token. */
static int32_t keep_matches(const lm_decoder *d, const grpo_batch *b, const float *acts) {
    const lm_keep *k = &d->keep;
    const lm_rows *r = &d->pfx.rows;
    if (!k->on || acts != k->k.acts || b->B != k->k.B || b->T > k->k.P + k->k.Tc ||
        !d->pfx.active || r->BP != k->k.BP || r->P != k->k.P ||
        lm_lora_active(&d->lin.lora) != k->lora || lm_lora_drops(&d->lin.lora))
        return 0;
    for (int32_t i = 0; i < b->B; i++)
        if (k->steps[i] > r->T) return 0;
    return memcmp(d->pfx.host_prefix_of, k->prefix_of, (size_t)b->B * sizeof(int32_t)) == 0;
}

/* dst = src, n floats, dst <= src in one block (they may overlap): copied in pieces no longer
 * than their distance, lowest first. */
static void move_down(const lm_decoder *d, float *dst, const float *src, uint64_t n) {
    const grpo_ops *o = d->ops;
    uint64_t gap = (uint64_t)(src - dst);
    if (!gap) return;
    for (uint64_t at = 0, len; at < n; at += len) {
        len = n - at < gap ? n - at : gap;
        o->copy(o->ctx, dst + at, src + at, len * sizeof(float));
    }
}

/* The kept tensors from the keep's layout (completion width Tc) to a's (the batch's Tc' =
 * rows->T < Tc, the same carve, every tensor smaller, so none lies higher): tensor by tensor
 * from the lowest, the prefix tokens, then each row's first Tc' tokens, each moved down. */
static void keep_narrow(lm_decoder *d, const lm_decoder_acts *a, const lm_rows *rows) {
    lm_keep *k = &d->keep;
    int32_t n = 0;
    kept_move *mv = k->moves;
    for (int32_t l = 0; l < d->L; l++) {
        const char *kl = (const char *)k->la + (size_t)l * d->layer_size;
        const lm_attn_acts *la = lm_decoder_layer(d, a, l);
        for (int32_t i = 0; i < k->n; i++)
            mv[n++] = (kept_move){tensor_at(kl, k->kept[i].off), tensor_at(la, k->kept[i].off),
                                  k->kept[i].width};
    }
    mv[n++] = (kept_move){k->top.xL, a->xL, (uint64_t)d->attn->C};
    for (int32_t i = 1; i < n; i++) /* by address in the keep's layout */
        for (int32_t j = i; j > 0 && mv[j].from < mv[j - 1].from; j--) {
            kept_move t = mv[j];
            mv[j] = mv[j - 1], mv[j - 1] = t;
        }
    uint64_t np = (uint64_t)rows->BP * rows->P, tc = (uint64_t)k->k.Tc, tn = (uint64_t)rows->T;
    for (int32_t i = 0; i < n; i++) {
        move_down(d, mv[i].to, mv[i].from, np * mv[i].w);
        for (int32_t b = 0; b < rows->B; b++)
            move_down(d, mv[i].to + (np + b * tn) * mv[i].w, mv[i].from + (np + b * tc) * mv[i].w,
                      tn * mv[i].w);
    }
}

/* Zeroes the tokens of tensor t (w floats each) that no decode call kept: row b's completion
 * tokens from steps[b] to Tc' = rows->T (the last token, which no decode step computes, and the
 * padding), so that every token the forward reads is finite. */
static void keep_zero_rest(const lm_decoder *d, float *t, uint64_t w, const lm_rows *rows) {
    const grpo_ops *o = d->ops;
    const lm_keep *k = &d->keep;
    uint64_t base = (uint64_t)rows->BP * rows->P;
    for (int32_t b = 0; b < rows->B; b++) {
        uint64_t from = base + (uint64_t)b * rows->T + (uint64_t)k->steps[b];
        uint64_t n = (uint64_t)(rows->T - k->steps[b]);
        if (n) o->zero(o->ctx, t + from * w, n * w * sizeof(float));
    }
}

/* The forward's layers from the kept rollout (keep_matches): the kept tensors are in acts, in
 * the training layout (moved to the batch's narrower one when its completions are shorter than
 * the keep's); what is not kept is computed: the untouched tokens zeroed, each layer's
 * attention (att, att_lse) from its q, k, v, and the final norm. Consumes the keep. */
static void keep_forward(lm_decoder *d, lm_decoder_acts *a, const grpo_batch *b,
                         const lm_rows *rows, float *acts) {
    lm_keep *k = &d->keep;
    lm_decoder_acts_carve(d, a, acts, b->B, b->T, 1);
    if (rows->T < k->k.Tc) keep_narrow(d, a, rows);
    for (int32_t l = 0; l < d->L; l++) {
        lm_attn_acts *la = lm_decoder_layer(d, a, l);
        for (int32_t i = 0; i < k->n; i++)
            keep_zero_rest(d, tensor_at(la, k->kept[i].off), k->kept[i].width, rows);
        lm_attn_core_forward(d->ops, d->attn, la, rows);
    }
    keep_zero_rest(d, a->xL, (uint64_t)d->attn->C, rows);
    final_norm(d, a, rows, b->B * b->T, a->lnf);
    k->on = 0;
}

/* The training forward: log-probs of the targets (the (N,V) logits are never stored); every
 * activation backward needs stays in acts. */
int32_t lm_decoder_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                           float *entropy, float scale, grpo_error *err) {
    lm_decoder *d = model;
    const grpo_ops *o = d->ops;
    int32_t B = batch->B, T = batch->T, N = B * T, C = d->attn->C;
    d->B = d->T = 0;
    int32_t st = check_bound(d, "forward", err);
    if (st == GRPO_OK) st = check_lm_head(d, "forward (log-probs)", err);
    if (st == GRPO_OK) st = check_batch(d, "forward", B, T, err);
    if (st == GRPO_OK) st = lm_lora_reserve(&d->lin.lora, (int64_t)N, d->who, err);
    if (st != GRPO_OK) return st;
    lm_decoder_acts a;
    lm_rows rows;
    const int32_t *ids;
    if ((st = training_rows(d, batch, &rows, &ids, err)) != GRPO_OK) return st;
    if (batch_kept(batch)) {
        if (frozen(d) || !keep_matches(d, batch, acts))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: forward of a kept (%d,%d) batch, but no rollout was kept "
                                  "for it (keep_rollout armed for another batch, or dropped)",
                                  d->who, B, T);
        keep_forward(d, &a, batch, &rows, acts);
    } else {
        if (!base_pass(d)) d->keep.on = 0; /* another pass: the kept rollout is dropped */
        st = normed_forward(d, &a, batch, &rows, ids, acts, !frozen(d), NULL, err);
        if (st != GRPO_OK) return st;
    }
    if (d->lin.wtype == GRPO_DTYPE_F32)
        o->head_forward(o->ctx, logp, a.head_lse, entropy, a.lnf, d->whead, batch->targets, N, C,
                        d->V, scale);
    else
        o->head_forward_w(o->ctx, logp, a.head_lse, entropy, a.lnf, d->whead, d->lin.wtype,
                          batch->targets, N, C, d->V, scale);
    d->B = B, d->T = T;
    return GRPO_OK;
}

/* Recomputation: layer l's activations again from its kept input la->x into the shared layer
 * buffers, by the same ops as the forward (so the same bits); the output goes to a->xr. */
static int32_t recompute_layer(lm_decoder *d, lm_decoder_acts *a, lm_attn_acts *la, int32_t l,
                               const lm_rows *rows, grpo_error *err) {
    lm_attn_forward(d->ops, d->attn, la, a->tmp, d->w[l].p, rows);
    return d->arch->forward(d, a->xr, la, a->tmp, l, rows->N, err);
}

/* Without recomputation: layer l's redone tensors (LM_ACTS_REDONE) again from its kept ones,
 * into the buffers all layers share. */
static int32_t redo_layer(lm_decoder *d, lm_attn_acts *la, int32_t l, const lm_rows *rows,
                          grpo_error *err) {
    lm_attn_redo(d->ops, d->attn, la, d->w[l].p, rows);
    return d->arch->redo ? d->arch->redo(d, la, l, rows->N, err) : GRPO_OK;
}

/* d loss/d norm(x_L) (B*T,C) in dlnf back to the packed tokens (rows->N,C) of the layers:
 * a shared column's rows add up (scatter_add_rows, in row order). Returns where it is. */
static const float *unpack_grad(const lm_decoder *d, float *dst, const float *dlnf,
                                const lm_rows *rows, int32_t N) {
    const grpo_ops *o = d->ops;
    if (!rows->BP) return dlnf;
    o->zero(o->ctx, dst, (uint64_t)rows->N * d->attn->C * sizeof(float));
    o->scatter_add_rows(o->ctx, dst, dlnf, d->pfx.idx, NULL, N, d->attn->C);
    return dst;
}

/* d loss/d logp (B,T), d loss/d entropy (B,T) when dentropy is not NULL, plus aux_weight *
 * d aux, back to every parameter gradient, through the activations of the preceding forward()
 * of the same batch. Accumulation rule of grpo/ops.h: parameter grads +=, activation grads =. */
static int32_t backward(lm_decoder *d, const grpo_batch *batch, float *acts, const float *dlogp,
                        const float *dentropy, const float *entropy, float scale,
                        grpo_error *err) {
    const grpo_ops *o = d->ops;
    int32_t B = batch->B, T = batch->T, N = B * T, C = d->attn->C;
    if (!d->bound || frozen(d))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: backward needs bound gradients or trained LoRA adapters "
                              "(this instance is frozen)", d->who);
    if (B != d->B || T != d->T)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: backward of a (%d,%d) batch after a forward of (%d,%d): "
                              "backward must follow the forward of the same batch", d->who, B,
                              T, d->B, d->T);
    float aux_weight = batch->struct_size >= offsetof(grpo_batch, aux_weight) + sizeof(float)
                           ? batch->aux_weight
                           : 0.0f;
    if (dentropy && !grpo_ops_supports(o, head_backward_entropy))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: the %s backend has no head_backward_entropy (ABI 1.4): the "
                              "entropy term cannot be differentiated", d->who, o->name);
    lm_decoder_acts a;
    lm_decoder_acts_carve(d, &a, acts, B, T, 1);
    lm_rows rows = d->pfx.active ? d->pfx.rows : lm_rows_plain(batch);
    const int32_t *ids = d->pfx.active ? d->pfx.ids : batch->ids;
    if (d->lin.wtype != GRPO_DTYPE_F32) /* a frozen head */
        o->head_backward_w(o->ctx, a.ag.dln, dlogp, dentropy, entropy, a.lnf, d->whead,
                           d->lin.wtype, batch->targets, a.head_lse, N, C, d->V, scale);
    else if (dentropy)
        o->head_backward_entropy(o->ctx, a.ag.dln, d->dwhead, dlogp, dentropy, entropy, a.lnf,
                                 d->whead, batch->targets, a.head_lse, N, C, d->V, scale);
    else
        o->head_backward(o->ctx, a.ag.dln, d->dwhead, dlogp, a.lnf, d->whead, batch->targets,
                         a.head_lse, N, C, d->V, scale);
    const float *dlnf = unpack_grad(d, a.ag.dtmp, a.ag.dln, &rows, N);
    o->rmsnorm_backward(o->ctx, a.dx, d->dwnorm, dlnf, a.xL, d->wnorm, a.lnf_rstd, rows.N, C);
    for (int32_t l = d->L - 1; l >= 0; l--) {
        lm_attn_acts *la = lm_decoder_layer(d, &a, l);
        int32_t st = d->recompute ? recompute_layer(d, &a, la, l, &rows, err)
                                  : redo_layer(d, la, l, &rows, err);
        if (st == GRPO_OK) st = d->arch->backward(d, &a, la, l, rows.N, aux_weight, err);
        if (st != GRPO_OK) return st;
        lm_attn_backward(o, d->attn, a.dx, a.dh, &a.ag, la, d->w[l].p, d->w[l].g, &rows);
    }
    o->embedding_backward(o->ctx, d->dwte, a.dx, ids, rows.N, C);
    return GRPO_OK;
}

int32_t lm_decoder_set_lora(void *model, const grpo_lora_adapter *adapters, uint32_t n,
                            int32_t enabled, grpo_error *err) {
    lm_decoder *d = model;
    if (!d->bound)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: set_lora before bind", d->who);
    d->B = d->T = 0; /* a backward must follow a forward with these adapters */
    return lm_lora_set(&d->lin.lora, d->ops, adapters, n, enabled, d->params, d->pt.descs, d->pt.n,
                       d->who, err);
}

int32_t lm_decoder_set_lora_rows(void *model, int32_t n, grpo_error *err) {
    lm_decoder *d = model;
    if (n >= 0 && !d->arch->rows_in_order)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%s: set_lora_rows: this pack runs "
                              "linear layers on rows gathered out of order (experts)", d->who);
    d->lin.lora.limited = n >= 0, d->lin.lora.rows = n >= 0 ? n : 0;
    return GRPO_OK;
}

int32_t lm_decoder_set_gradient_checkpointing(void *model, int32_t on, grpo_error *err) {
    (void)err;
    lm_decoder *d = model;
    d->recompute = on != 0;
    d->B = d->T = 0; /* the activation layout changed: a backward needs a fresh forward */
    return GRPO_OK;
}

int32_t lm_decoder_set_shared_prefix(void *model, int32_t P, grpo_error *err) {
    lm_decoder *d = model;
    if (P < 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: set_shared_prefix: P = %d, expected "
                              ">= 0", d->who, P);
    d->share_P = P;
    return GRPO_OK;
}

int32_t lm_decoder_backward(void *model, const grpo_batch *batch, float *acts,
                            const float *dlogp, float scale, grpo_error *err) {
    return backward(model, batch, acts, dlogp, NULL, NULL, scale, err);
}

int32_t lm_decoder_backward_entropy(void *model, const grpo_batch *batch, float *acts,
                                    const float *dlogp, const float *dentropy,
                                    const float *entropy, float scale, grpo_error *err) {
    if (!dentropy || !entropy)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: backward_entropy needs dentropy and "
                              "entropy", ((lm_decoder *)model)->who);
    return backward(model, batch, acts, dlogp, dentropy, entropy, scale, err);
}

uint64_t lm_decoder_kv_floats(void *model, int32_t R, int32_t S) {
    lm_decoder *d = model;
    return lm_kv_floats(d->L, kv_width(d), R, S);
}

uint64_t lm_decoder_scratch_floats(void *model, int32_t R, int32_t T) {
    return lm_decoder_acts_floats(model, R, T, 0);
}

uint64_t lm_decoder_kv_page_floats(void *model, int32_t page) {
    lm_decoder *d = model;
    /* a backend without the paged op: no paged cache (the host then gives the unpaged one) */
    if (!grpo_ops_supports(d->ops, attention_decode_paged)) return 0;
    return lm_kv_page_floats(d->L, kv_width(d), page);
}

void lm_decoder_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                            int32_t n) {
    lm_decoder *d = model;
    lm_kv_copy_row(d->ops, kv, kv_width(d), d->L, dst, src, n);
}

/* Left-padded prompts (B,T) into cache rows 0..B-1; logits (B,V) of each row's last token. */
int32_t lm_decoder_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                           float *scratch, float *logits, grpo_error *err) {
    lm_decoder *d = model;
    int32_t B = prompt->B, T = prompt->T;
    d->B = d->T = 0;
    int32_t st = check_bound(d, "prefill", err);
    if (st == GRPO_OK) st = check_lm_head(d, "prefill", err);
    if (st == GRPO_OK) st = lm_prefill_check(d->who, kv, B, T, err);
    if (st == GRPO_OK) st = check_left_padded(d, prompt->mask, B, T, err);
    if (st == GRPO_OK) st = lm_lora_reserve(&d->lin.lora, (int64_t)B * T, d->who, err);
    if (st != GRPO_OK) return st;
    lm_decoder_acts a;
    lm_decoder_acts_carve(d, &a, scratch, B, T, 0);
    lm_rows rows = lm_rows_plain(prompt);
    lm_lora_pass_rows(&d->lin.lora, B, T);
    int32_t Bk = lm_lora_adapted_rows(&d->lin.lora, B); /* kept: the adapted rows, the first */
    if (d->keep.on && (Bk != d->keep.k.BP || T != d->keep.k.P || d->keep.adopted))
        d->keep.on = 0; /* not its prompts, or another instance's rollout */
    keep_at at = {NULL, (uint64_t)Bk * T, 0};
    st = body_forward(d, &a, prompt->ids, &rows, kv, d->keep.on ? &at : NULL, err);
    if (st != GRPO_OK) return st;
    lm_last_columns(d->ops, a.tmp, a.xL, B, T, d->attn->C); /* tmp (B,C) */
    logits_forward(d, logits, &a, a.tmp, B);
    return GRPO_OK;
}

/* One token for each of R rows: logits (R,V); this step's keys/values go to slot len[r]-1. */
int32_t lm_decoder_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                          const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                          float *scratch, float *logits, grpo_error *err) {
    lm_decoder *d = model;
    d->B = d->T = 0;
    int32_t *hlen = NULL, st = check_bound(d, "decode", err);
    if (st == GRPO_OK) st = check_lm_head(d, "decode", err);
    if (st == GRPO_OK) st = lm_lora_reserve(&d->lin.lora, R, d->who, err);
    if (st == GRPO_OK) st = lm_decode_lengths(d->who, d->host, kv, len, R, &hlen, err);
    if (st != GRPO_OK) return st;
    lm_decoder_acts a;
    lm_decoder_acts_carve(d, &a, scratch, R, 1, 0);
    lm_lora_pass_rows(&d->lin.lora, R, 1);
    if (d->keep.adopted) d->keep.on = 0; /* another instance's rollout: this one decodes anew */
    int64_t *idx = d->keep.on ? keep_tokens(d, hlen, R) : NULL;
    keep_at at = {idx, 0, R};
    if (d->keep.on && !idx)
        st = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: decode: out of memory", d->who);
    else
        st = body_decode(d, &a, kv, R, tokens, pos, cache_mask, len, hlen, idx ? &at : NULL, err);
    d->host->free(idx);
    d->host->free(hlen);
    if (st != GRPO_OK) return st;
    logits_forward(d, logits, &a, a.xL, R);
    return GRPO_OK;
}

int32_t lm_decoder_hidden_size(void *model) { return ((lm_decoder *)model)->attn->C; }

int32_t lm_decoder_vocab_size(void *model) { return ((lm_decoder *)model)->V; }

int32_t lm_decoder_hidden(void *model, const grpo_batch *batch, float *scratch, float *out,
                          grpo_error *err) {
    lm_decoder *d = model;
    d->B = d->T = 0;
    d->keep.on = 0; /* another pass: a kept rollout is dropped */
    int32_t st = check_bound(d, "hidden", err);
    if (st == GRPO_OK) st = check_batch(d, "hidden", batch->B, batch->T, err);
    if (st == GRPO_OK) st = lm_lora_reserve(&d->lin.lora, (int64_t)batch->B * batch->T, d->who, err);
    if (st != GRPO_OK) return st;
    lm_decoder_acts a;
    lm_rows rows = lm_rows_plain(batch);
    return normed_forward(d, &a, batch, &rows, batch->ids, scratch, 0, out, err);
}
