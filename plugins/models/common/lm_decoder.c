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

void lm_decoder_acts_carve(lm_decoder *d, lm_decoder_acts *a, float *block, int32_t B,
                           int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T;
    int32_t shared = shared_layers(d, train);
    *a = (lm_decoder_acts){0};
    a->l = d->la;
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

/* Embedding + all layers over the tokens of rows (ids (rows->N)): fills the layers of a and
 * a->xL. When kv is not NULL (prefill, plain rows), each layer's rotated keys and values go to
 * cache rows 0..B-1, slots 0..T-1. begin() (a pack's per-row statistics) sees plain rows only
 * (lm_prefix_possible). */
static int32_t body_forward(lm_decoder *d, lm_decoder_acts *a, const int32_t *ids,
                            const lm_rows *rows, const grpo_kv_cache *kv, grpo_error *err) {
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
        st = h->forward(d, out, la, a->tmp, l, N, err);
    }
    if (st == GRPO_OK && h->end) h->end(d);
    return st;
}

/* One decode step of R rows (tokens (R)) through every layer: a->xL (R,C). */
static int32_t body_decode(lm_decoder *d, lm_decoder_acts *a, const grpo_kv_cache *kv, int32_t R,
                           const int32_t *tokens, const int32_t *pos, const int32_t *cache_mask,
                           const int32_t *len, const int32_t *hlen, grpo_error *err) {
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
        st = h->forward(d, out, la, a->tmp, l, R, err);
    }
    if (st == GRPO_OK && h->end) h->end(d);
    return st;
}

/* The batch through the body (over rows, ids) and the final norm: out (B,T,C) = norm(x_L) (out
 * NULL: a->lnf), a carved from block (train: the training layout). Packed rows are normed in
 * a->tmp and gathered back to the (B,T) layout (lm_prefix.h). */
static int32_t normed_forward(lm_decoder *d, lm_decoder_acts *a, const grpo_batch *batch,
                              const lm_rows *rows, const int32_t *ids, float *block,
                              int32_t train, float *out, grpo_error *err) {
    const grpo_ops *o = d->ops;
    int32_t B = batch->B, T = batch->T, C = d->attn->C;
    lm_decoder_acts_carve(d, a, block, B, T, train);
    int32_t st = body_forward(d, a, ids, rows, NULL, err);
    if (st != GRPO_OK) return st;
    out = out ? out : a->lnf;
    o->rmsnorm_forward(o->ctx, rows->BP ? a->tmp : out, a->lnf_rstd, a->xL, d->wnorm, rows->N, C,
                       d->attn->eps);
    if (rows->BP) o->gather_rows(o->ctx, out, a->tmp, d->pfx.idx, B * T, C);
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
    st = normed_forward(d, &a, batch, &rows, ids, acts, !frozen(d), NULL, err);
    if (st != GRPO_OK) return st;
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
    st = body_forward(d, &a, prompt->ids, &rows, kv, err);
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
    st = body_decode(d, &a, kv, R, tokens, pos, cache_mask, len, hlen, err);
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
    int32_t st = check_bound(d, "hidden", err);
    if (st == GRPO_OK) st = check_batch(d, "hidden", batch->B, batch->T, err);
    if (st == GRPO_OK) st = lm_lora_reserve(&d->lin.lora, (int64_t)batch->B * batch->T, d->who, err);
    if (st != GRPO_OK) return st;
    lm_decoder_acts a;
    lm_rows rows = lm_rows_plain(batch);
    return normed_forward(d, &a, batch, &rows, batch->ids, scratch, 0, out, err);
}
