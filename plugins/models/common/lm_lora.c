/* lm_lora.c — LoRA adapters on the linear layers (see lm_lora.h). */
#include "lm_lora.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void lm_lora_free(lm_lora *l) {
    if (l->buf) l->o->free(l->o->ctx, l->buf);
    free(l->a), free(l->w);
    memset(l, 0, sizeof *l);
}

int32_t lm_lora_active(const lm_lora *l) { return l && l->n > 0 && l->enabled; }

int32_t lm_lora_drops(const lm_lora *l) {
    for (uint32_t i = 0; lm_lora_active(l) && i < l->n; i++)
        if (l->a[i].dropout > 0.0f) return 1;
    return 0;
}

int32_t lm_lora_trains(const lm_lora *l) {
    for (uint32_t i = 0; l && i < l->n; i++)
        if (l->a[i].dA || l->a[i].dB) return 1;
    return 0;
}

static int32_t check_adapter(const grpo_lora_adapter *a, const grpo_param_desc *descs,
                             uint32_t n_params, const char *who, grpo_error *err) {
    if (a->struct_size < offsetof(grpo_lora_adapter, dropout)) /* the 1.4 fields */
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: set_lora: adapter struct_size %u < %zu",
                              who, a->struct_size, offsetof(grpo_lora_adapter, dropout));
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
    l->o = o, l->enabled = enabled; /* limited = 0: every row (set_lora_rows is undone) */
    l->on = -1;
    l->buf = old.buf, l->cap = old.cap, old.buf = NULL;
    if (n > 0) {
        l->a = malloc(n * sizeof *l->a), l->w = malloc(n * sizeof *l->w);
        if (!l->a || !l->w) {
            lm_lora_free(l), lm_lora_free(&old);
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: set_lora: out of memory", who);
        }
    }
    /* the host's array strides by its struct_size (a 1.4 host's adapters lack the dropout) */
    size_t stride = n > 0 ? adapters[0].struct_size : 0;
    for (uint32_t i = 0; i < n; i++) {
        grpo_lora_adapter *a = &l->a[i];
        memset(a, 0, sizeof *a);
        const grpo_lora_adapter *src =
            (const grpo_lora_adapter *)((const char *)adapters + i * stride);
        memcpy(a, src, stride < sizeof *a ? stride : sizeof *a);
        a->struct_size = sizeof *a;
        int32_t st = stride == src->struct_size ? check_adapter(src, descs, n_params, who, err)
                                                : grpo_error_set(err, GRPO_ERR_ABI,
                                                                 "%s: set_lora: adapters of "
                                                                 "different struct_size", who);
        if (st == GRPO_OK && !(a->dropout >= 0.0f && a->dropout < 1.0f))
            st = grpo_error_set(err, GRPO_ERR_INVALID, "%s: set_lora: adapter on parameter %u "
                                "has dropout %g; expected [0, 1)", who, a->param,
                                (double)a->dropout);
        if (st == GRPO_OK && a->dropout > 0.0f && !grpo_ops_supports(o, dropout))
            st = grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%s: set_lora: LoRA dropout needs the "
                                "%s backend's dropout op (ABI 1.5)", who, o->name);
        if (st != GRPO_OK) {
            lm_lora_free(l), lm_lora_free(&old);
            return st;
        }
        uint32_t p = a->param;
        l->w[i] = params[p];
        int64_t OC = descs[p].shape[0], IC = descs[p].shape[1];
        /* h, dh (N,r); t (N, max(IC,OC)); the dropped input (N,IC) */
        int64_t width = 2 * a->r + (IC > OC ? IC : OC) + IC;
        if (width > l->width) l->width = width;
    }
    l->n = n;
    lm_lora_free(&old);
    return GRPO_OK;
}

int32_t lm_lora_reserve(lm_lora *l, int64_t N, const char *who, grpo_error *err) {
    l->on = -1; /* a new pass: every token, until lm_lora_pass_rows says otherwise */
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

int32_t lm_lora_adapted_rows(const lm_lora *l, int32_t B) {
    return l->limited && l->rows < B ? l->rows : B;
}

void lm_lora_pass_rows(lm_lora *l, int32_t B, int32_t T) {
    l->on = l->limited ? (int64_t)lm_lora_adapted_rows(l, B) * T : -1;
}

/* The adapter on w, or NULL (none, or adapters off). */
static const grpo_lora_adapter *adapter_of(const lm_lora *l, const float *w) {
    if (!lm_lora_active(l)) return NULL;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->w[i] == w) return &l->a[i];
    return NULL;
}

/* The adapter's input: inp itself, or drop(inp) (N,IC) in the scratch's last columns. */
static const float *dropped_input(const grpo_ops *o, const lm_lora *l,
                                  const grpo_lora_adapter *a, const float *inp, int32_t N,
                                  int32_t IC) {
    if (a->dropout <= 0.0f) return inp;
    float *x = l->buf + (size_t)N * (l->width - IC);
    o->dropout(o->ctx, x, inp, (uint64_t)N * IC, a->dropout, a->seed);
    return x;
}

void lm_lora_forward_add(const grpo_ops *o, const lm_lora *l, float *out, const float *inp,
                         const float *w, int32_t N, int32_t IC, int32_t OC) {
    const grpo_lora_adapter *a = adapter_of(l, w);
    if (l->on >= 0 && l->on < N) N = (int32_t)l->on; /* the base's rows after them: as is */
    if (!a || N == 0) return;
    float *h = l->buf, *t = h + (size_t)N * a->r; /* h (N,r), t (N,OC) */
    inp = dropped_input(o, l, a, inp, N, IC);
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
    inp = dropped_input(o, l, a, inp, N, IC); /* the forward's mask again, from its seed */
    o->matmul_forward(o->ctx, h, inp, a->A, NULL, N, IC, a->r); /* recomputed: (N,r) is cheap */
    o->scale(o->ctx, h, a->scale, (uint64_t)N * a->r);
    o->matmul_backward(o->ctx, dh, a->dB, NULL, dout, h, a->B, N, a->r, OC);
    o->scale(o->ctx, dh, a->scale, (uint64_t)N * a->r);
    o->matmul_backward(o->ctx, dinp ? t : NULL, a->dA, NULL, dh, inp, a->A, N, IC, a->r);
    if (!dinp) return;
    if (a->dropout > 0.0f) /* d drop(x) / dx: the same mask and scale */
        o->dropout(o->ctx, t, t, (uint64_t)N * IC, a->dropout, a->seed);
    o->accumulate(o->ctx, dinp, t, (uint64_t)N * IC);
}
