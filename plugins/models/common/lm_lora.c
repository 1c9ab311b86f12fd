/* lm_lora.c — LoRA adapters on the linear layers (see lm_lora.h). */
#include "lm_lora.h"

#include <stdlib.h>
#include <string.h>

void lm_lora_free(lm_lora *l) {
    if (l->buf) l->o->free(l->o->ctx, l->buf);
    free(l->a), free(l->w);
    memset(l, 0, sizeof *l);
}

int32_t lm_lora_active(const lm_lora *l) { return l && l->n > 0 && l->enabled; }

int32_t lm_lora_trains(const lm_lora *l) {
    for (uint32_t i = 0; l && i < l->n; i++)
        if (l->a[i].dA || l->a[i].dB) return 1;
    return 0;
}

static int32_t check_adapter(const grpo_lora_adapter *a, const grpo_param_desc *descs,
                             uint32_t n_params, const char *who, grpo_error *err) {
    if (a->struct_size < sizeof(grpo_lora_adapter))
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: set_lora: adapter struct_size %u < %zu",
                              who, a->struct_size, sizeof(grpo_lora_adapter));
    if (a->param >= n_params || descs[a->param].ndim != 2)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: set_lora: parameter %u is not a 2-D linear weight", who,
                              a->param);
    if (a->r <= 0 || !a->A || !a->B)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: set_lora: adapter on parameter %u "
                              "needs r > 0 and A, B", who, a->param);
    return GRPO_OK;
}

int32_t lm_lora_set(lm_lora *l, const grpo_ops *o, const grpo_lora_adapter *adapters, uint32_t n,
                    int32_t enabled, float *const *params, const grpo_param_desc *descs,
                    uint32_t n_params, const char *who, grpo_error *err) {
    lm_lora old = *l; /* kept until the new set is complete */
    memset(l, 0, sizeof *l);
    l->o = o, l->enabled = enabled;
    l->buf = old.buf, l->cap = old.cap, old.buf = NULL;
    if (n > 0) {
        l->a = malloc(n * sizeof *l->a), l->w = malloc(n * sizeof *l->w);
        if (!l->a || !l->w) {
            lm_lora_free(l), lm_lora_free(&old);
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: set_lora: out of memory", who);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        int32_t st = check_adapter(&adapters[i], descs, n_params, who, err);
        if (st != GRPO_OK) {
            lm_lora_free(l), lm_lora_free(&old);
            return st;
        }
        uint32_t p = adapters[i].param;
        l->a[i] = adapters[i], l->w[i] = params[p];
        int64_t OC = descs[p].shape[0], IC = descs[p].shape[1];
        int64_t width = 2 * adapters[i].r + (IC > OC ? IC : OC);
        if (width > l->width) l->width = width;
    }
    l->n = n;
    lm_lora_free(&old);
    return GRPO_OK;
}

int32_t lm_lora_reserve(lm_lora *l, int64_t N, const char *who, grpo_error *err) {
    if (!lm_lora_active(l)) return GRPO_OK;
    uint64_t need = (uint64_t)N * (uint64_t)l->width;
    if (need <= l->cap) return GRPO_OK;
    if (l->buf) l->o->free(l->o->ctx, l->buf);
    l->buf = l->o->alloc(l->o->ctx, need * sizeof(float));
    l->cap = l->buf ? need : 0;
    if (!l->buf)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory for LoRA scratch of %lld "
                              "rows", who, (long long)N);
    return GRPO_OK;
}

/* The adapter on w, or NULL (none, or adapters off). */
static const grpo_lora_adapter *adapter_of(const lm_lora *l, const float *w) {
    if (!lm_lora_active(l)) return NULL;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->w[i] == w) return &l->a[i];
    return NULL;
}

void lm_lora_forward_add(const grpo_ops *o, const lm_lora *l, float *out, const float *inp,
                         const float *w, int32_t N, int32_t IC, int32_t OC) {
    const grpo_lora_adapter *a = adapter_of(l, w);
    if (!a) return;
    float *h = l->buf, *t = h + (size_t)N * a->r; /* h (N,r), t (N,OC) */
    o->matmul_forward(o->ctx, h, inp, a->A, NULL, N, IC, a->r);
    o->scale(o->ctx, h, a->scale, (uint64_t)N * a->r);
    o->matmul_forward(o->ctx, t, h, a->B, NULL, N, a->r, OC);
    o->accumulate(o->ctx, out, t, (uint64_t)N * OC);
}

void lm_lora_backward_add(const grpo_ops *o, const lm_lora *l, float *dinp, const float *dout,
                          const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC) {
    const grpo_lora_adapter *a = adapter_of(l, w);
    if (!a) return;
    float *h = l->buf, *dh = h + (size_t)N * a->r, *t = dh + (size_t)N * a->r;
    o->matmul_forward(o->ctx, h, inp, a->A, NULL, N, IC, a->r); /* recomputed: (N,r) is cheap */
    o->scale(o->ctx, h, a->scale, (uint64_t)N * a->r);
    o->matmul_backward(o->ctx, dh, a->dB, NULL, dout, h, a->B, N, a->r, OC);
    o->scale(o->ctx, dh, a->scale, (uint64_t)N * a->r);
    o->matmul_backward(o->ctx, dinp ? t : NULL, a->dA, NULL, dh, inp, a->A, N, IC, a->r);
    if (dinp) o->accumulate(o->ctx, dinp, t, (uint64_t)N * IC);
}
