/*
 * test_model_io.h — the model API (core/host/model_instance.h, grpo/model.h) called from tests
 * with host arrays. Every array that API takes or writes is backend memory: on the cuda backend
 * device memory, which a kernel cannot read from the host's heap or stack (a GPU faults; the
 * emulation's strict mode stops, kernels/cuda/emu/emu.h). The trainer and the sampler move their
 * arrays through the op table (core/train/seqbatch.c, core/host/sampler.c); a test does the same
 * here, so its body keeps host arrays:
 *   test_batch        a grpo_batch whose (B,T) arrays are uploaded copies of host arrays;
 *   test_forward      forward, logp/entropy (B,T) downloaded into host arrays;
 *   test_backward     backward (and _entropy) with dlogp/dentropy/entropy (B,T) from host arrays;
 *   test_prefill      prefill of a host-array prompt, logits (B,V) downloaded;
 *   test_decode       decode of host-array tokens, logits (R,V) downloaded.
 * On the cpu backend alloc/upload/download are malloc/memcpy: the same calls as before.
 * An output buffer is uploaded from the caller's array first, so what the model does not write
 * (e.g. logp where targets < 0) reads back as the caller's initial values.
 */
#ifndef GRPO_TEST_MODEL_IO_H
#define GRPO_TEST_MODEL_IO_H

#include <check.h>
#include <stdint.h>

#include "host/model_instance.h"

/* A batch in backend memory; b is what the model API takes. */
typedef struct test_batch {
    const grpo_ops *o;
    grpo_batch b;
    int32_t *dev[4]; /* ids, mask, pos, targets (NULL when the host's targets were NULL) */
} test_batch;

/* n bytes of backend memory holding a copy of host (NULL: zeros). */
static inline void *test_dev_copy(const grpo_ops *o, const void *host, uint64_t bytes) {
    void *d = o->alloc(o->ctx, bytes);
    ck_assert_msg(d != NULL, "backend: out of memory for %llu bytes", (unsigned long long)bytes);
    if (host) o->upload(o->ctx, d, host, bytes);
    return d;
}

/* Uploads the (B,T) host arrays (targets may be NULL: a prompt) into a batch. */
static inline test_batch test_batch_make(const grpo_ops *o, int32_t B, int32_t T,
                                         const int32_t *ids, const int32_t *mask,
                                         const int32_t *pos, const int32_t *targets,
                                         float aux_weight) {
    uint64_t bytes = (uint64_t)B * T * sizeof(int32_t);
    const int32_t *host[4] = {ids, mask, pos, targets};
    test_batch t = {o, {sizeof(grpo_batch), B, T, NULL, NULL, NULL, NULL, aux_weight, 0}, {0}};
    for (int i = 0; i < 4; i++) t.dev[i] = host[i] ? test_dev_copy(o, host[i], bytes) : NULL;
    t.b.ids = t.dev[0], t.b.mask = t.dev[1], t.b.pos = t.dev[2], t.b.targets = t.dev[3];
    return t;
}

static inline void test_batch_free(test_batch *t) {
    for (int i = 0; i < 4; i++)
        if (t->dev[i]) t->o->free(t->o->ctx, t->dev[i]);
    memset(t, 0, sizeof *t);
}

/* Backend memory for an output of n floats, holding the host array's values; the copy back. */
static inline float *test_out_make(const grpo_ops *o, const float *host, uint64_t n) {
    return host ? test_dev_copy(o, host, n * sizeof(float)) : NULL;
}
static inline void test_out_take(const grpo_ops *o, float *host, float *dev, uint64_t n) {
    if (!host) return;
    o->download(o->ctx, host, dev, n * sizeof(float));
    o->free(o->ctx, dev);
}

/* grpo_model_forward of b (backend memory) into host logp and entropy (NULL: not wanted). */
static inline int test_forward(grpo_model *m, const grpo_batch *b, float *logp, float *entropy,
                               float scale, grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t n = (uint64_t)b->B * b->T;
    float *dl = test_out_make(o, logp, n), *de = test_out_make(o, entropy, n);
    int rc = grpo_model_forward(m, b, dl, de, scale, err);
    test_out_take(o, logp, dl, n), test_out_take(o, entropy, de, n);
    return rc;
}

/* grpo_model_backward_entropy (dentropy NULL: grpo_model_backward) with host dlogp, dentropy
 * and entropy (B,T). */
static inline int test_backward_entropy(grpo_model *m, const grpo_batch *b, const float *dlogp,
                                        const float *dentropy, const float *entropy,
                                        float scale, grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t n = (uint64_t)b->B * b->T;
    float *dd = test_out_make(o, dlogp, n), *dde = test_out_make(o, dentropy, n);
    float *de = dentropy ? test_out_make(o, entropy, n) : NULL;
    int rc = dentropy ? grpo_model_backward_entropy(m, b, dd, dde, de, scale, err)
                      : grpo_model_backward(m, b, dd, scale, err);
    float *dev[3] = {dd, dde, de};
    for (int i = 0; i < 3; i++)
        if (dev[i]) o->free(o->ctx, dev[i]);
    return rc;
}

static inline int test_backward(grpo_model *m, const grpo_batch *b, const float *dlogp,
                                float scale, grpo_error *err) {
    return test_backward_entropy(m, b, dlogp, NULL, NULL, scale, err);
}

/* grpo_model_prefill of the (B,T) host arrays; logits (B,V) into host memory. */
static inline int test_prefill(grpo_model *m, int32_t B, int32_t T, const int32_t *ids,
                               const int32_t *mask, const int32_t *pos, float *logits,
                               grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t n = (uint64_t)B * grpo_model_vocab(m);
    test_batch p = test_batch_make(o, B, T, ids, mask, pos, NULL, 0.0f);
    float *dl = test_out_make(o, logits, n);
    int rc = grpo_model_prefill(m, &p.b, dl, err);
    test_out_take(o, logits, dl, n);
    test_batch_free(&p);
    return rc;
}

/* grpo_model_decode of R rows from host tokens, pos, len (R) and cache_mask (R, m->kv.S);
 * logits (R,V) into host memory. */
static inline int test_decode(grpo_model *m, int32_t R, const int32_t *tokens,
                              const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                              float *logits, grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t ints = (uint64_t)R * sizeof(int32_t), n = (uint64_t)R * grpo_model_vocab(m);
    int32_t *dt = test_dev_copy(o, tokens, ints), *dp = test_dev_copy(o, pos, ints);
    int32_t *dm = test_dev_copy(o, cache_mask, ints * m->kv.S);
    int32_t *dn = test_dev_copy(o, len, ints);
    float *dl = test_out_make(o, logits, n);
    int rc = grpo_model_decode(m, R, dt, dp, dm, dn, dl, err);
    test_out_take(o, logits, dl, n);
    void *dev[4] = {dt, dp, dm, dn};
    for (int i = 0; i < 4; i++) o->free(o->ctx, dev[i]);
    return rc;
}

#endif
