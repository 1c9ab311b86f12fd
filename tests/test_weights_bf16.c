/*
 * test_weights_bf16.c — weights held in bf16 (ABI 1.5: grpo/ops.h's typed ops, the packs'
 * bind_typed, grpo_model_open_as), the one mechanism behind lora.base_dtype = bf16 and
 * sampling.weights_dtype = bf16.
 *
 * Widening bf16 to fp32 is exact, so a model held in bf16 must compute what the same model
 * computes in fp32 once its weights are rounded to bf16 (the fp32 path is checked against
 * transformers in test_dense / test_moe / test_lora): the two differ only by the order of sums
 * across weight panels (atol 2e-5 on log-probs of O(1..10), 1e-5 relative on gradients).
 *   - the rounding is PyTorch's .to(torch.bfloat16): round to nearest, ties to even, NaN stays
 *     NaN, overflow to infinity (bit patterns by hand);
 *   - each typed op equals its fp32 op on the widened weight (decode-sized rows bit for bit: the
 *     small-M kernel sums in the same order per column);
 *   - the dense (llama, qwen3) and MoE fixtures held in bf16: the log-probs, entropies, LoRA
 *     adapter gradients (peft fixtures' adapters on the frozen base) and prefill logits of the
 *     rounded fp32 model, in about half the parameter memory;
 *   - a trainable model in bf16 is refused, and copy_weights refreshes a bf16 copy from fp32.
 */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "host/host.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "kernels.h"

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

START_TEST(rounding_is_nearest_even) {
    /* exact values keep their top 16 bits */
    ck_assert_uint_eq(grpo_bf16_from_f32(1.0f), 0x3f80);
    ck_assert_uint_eq(grpo_bf16_from_f32(-2.0f), 0xc000);
    /* below half an ulp down, above half an ulp up */
    ck_assert_uint_eq(grpo_bf16_from_f32(from_bits(0x3f807fffu)), 0x3f80);
    ck_assert_uint_eq(grpo_bf16_from_f32(from_bits(0x3f808001u)), 0x3f81);
    /* ties go to the even neighbour */
    ck_assert_uint_eq(grpo_bf16_from_f32(from_bits(0x3f808000u)), 0x3f80);
    ck_assert_uint_eq(grpo_bf16_from_f32(from_bits(0x3f818000u)), 0x3f82);
    /* the largest float rounds up to infinity; infinities and NaN stay what they are */
    ck_assert_uint_eq(grpo_bf16_from_f32(from_bits(0x7f7fffffu)), 0x7f80);
    ck_assert_uint_eq(grpo_bf16_from_f32(INFINITY), 0x7f80);
    ck_assert_uint_eq(grpo_bf16_from_f32(-INFINITY), 0xff80);
    ck_assert(isnan(grpo_bf16_to_f32(grpo_bf16_from_f32(NAN))));
    ck_assert(isnan(grpo_bf16_to_f32(grpo_bf16_from_f32(from_bits(0x7f800001u))))); /* low NaN */
    /* widening is exact */
    ck_assert_uint_eq(bits(grpo_bf16_to_f32(0x3f81)), 0x3f810000u);
}
END_TEST

/* ---- the typed ops against the fp32 ops on the widened weights ------------------------------ */

static uint64_t rs = 0x1234567ull;
static float frand(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* w16 (n) random bf16, w32 (n) the same widened */
static void random_weights(uint16_t *w16, float *w32, size_t n) {
    for (size_t i = 0; i < n; i++) {
        w16[i] = grpo_bf16_from_f32(frand());
        w32[i] = grpo_bf16_to_f32(w16[i]);
    }
}

static void expect_close(const char *what, const float *got, const float *want, size_t n,
                         double atol, double rtol) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]),
                      "%s[%zu]: %.9g vs %.9g", what, i, got[i], want[i]);
}

START_TEST(typed_ops_equal_the_fp32_ops_on_widened_weights) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = grpo_backend_open("cpu", 2, &err);
    ck_assert_msg(o != NULL, "%s", err.message);
    /* OC = 600 spans three 256-row panels; N = 16 takes the small-M path, N = 100 the GEMM */
    const int32_t IC = 96, OC = 600, Ns[2] = {16, 100};
    uint16_t *w16 = malloc((size_t)OC * IC * 2);
    float *w32 = malloc((size_t)OC * IC * 4), *bias = malloc((size_t)OC * 4);
    random_weights(w16, w32, (size_t)OC * IC);
    for (int32_t j = 0; j < OC; j++) bias[j] = frand();
    for (int k = 0; k < 2; k++) {
        int32_t N = Ns[k];
        float *x = malloc((size_t)N * IC * 4), *y1 = malloc((size_t)N * OC * 4);
        float *y2 = malloc((size_t)N * OC * 4), *d1 = malloc((size_t)N * IC * 4);
        float *d2 = malloc((size_t)N * IC * 4), *dy = malloc((size_t)N * OC * 4);
        for (int32_t i = 0; i < N * IC; i++) x[i] = frand();
        for (int32_t i = 0; i < N * OC; i++) dy[i] = frand();
        o->matmul_forward(o->ctx, y1, x, w32, bias, N, IC, OC);
        o->matmul_forward_w(o->ctx, y2, x, w16, GRPO_DTYPE_BF16, bias, N, IC, OC);
        if (N <= CPU_SMALL_M)
            ck_assert_msg(memcmp(y1, y2, (size_t)N * OC * 4) == 0, "decode rows: not the bits");
        else
            expect_close("matmul_forward_w", y2, y1, (size_t)N * OC, 1e-6, 1e-6);
        o->matmul_backward(o->ctx, d1, NULL, NULL, dy, x, w32, N, IC, OC);
        o->matmul_backward_w(o->ctx, d2, dy, w16, GRPO_DTYPE_BF16, N, IC, OC);
        /* sums of OC = 600 products of magnitude ~0.25 in another order (three panels): fp32
         * rounding of ~1e-7 x 150 each way, so 1e-4 */
        expect_close("matmul_backward_w", d2, d1, (size_t)N * IC, 1e-4, 1e-5);
        free(x), free(y1), free(y2), free(d1), free(d2), free(dy);
    }
    /* the embedding and the fused head, V = 600 rows of C = 96 */
    const int32_t N = 40, V = OC, C = IC;
    int32_t ids[40], targets[40];
    float *h = malloc((size_t)N * C * 4), *e1 = malloc((size_t)N * C * 4);
    float *e2 = malloc((size_t)N * C * 4);
    float lp1[40], lp2[40], ls1[40], ls2[40], en1[40], en2[40], dlp[40], den[40];
    for (int32_t n = 0; n < N; n++) {
        ids[n] = (int32_t)((frand() + 1.0f) * 299.0f);
        targets[n] = n % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 299.0f);
        dlp[n] = frand(), den[n] = frand();
    }
    for (int32_t i = 0; i < N * C; i++) h[i] = frand();
    o->embedding_forward(o->ctx, e1, ids, w32, N, C);
    o->embedding_forward_w(o->ctx, e2, ids, w16, GRPO_DTYPE_BF16, N, C);
    ck_assert(memcmp(e1, e2, (size_t)N * C * 4) == 0);
    o->head_forward(o->ctx, lp1, ls1, en1, h, w32, targets, N, C, V, 0.8f);
    o->head_forward_w(o->ctx, lp2, ls2, en2, h, w16, GRPO_DTYPE_BF16, targets, N, C, V, 0.8f);
    ck_assert(memcmp(lp1, lp2, sizeof lp1) == 0 && memcmp(en1, en2, sizeof en1) == 0);
    o->head_backward_entropy(o->ctx, e1, NULL, dlp, den, en1, h, w32, targets, ls1, N, C, V, 0.8f);
    o->head_backward_w(o->ctx, e2, dlp, den, en2, h, w16, GRPO_DTYPE_BF16, targets, ls2, N, C, V,
                       0.8f);
    ck_assert(memcmp(e1, e2, (size_t)N * C * 4) == 0); /* same chunks, same order */
    /* convert: fp32 -> bf16 is grpo_bf16_from_f32, bf16 -> fp32 exact */
    uint16_t *c16 = malloc((size_t)N * C * 2);
    o->convert(o->ctx, c16, GRPO_DTYPE_BF16, h, GRPO_DTYPE_F32, (uint64_t)N * C);
    for (int32_t i = 0; i < N * C; i++) ck_assert_uint_eq(c16[i], grpo_bf16_from_f32(h[i]));
    o->convert(o->ctx, e1, GRPO_DTYPE_F32, c16, GRPO_DTYPE_BF16, (uint64_t)N * C);
    for (int32_t i = 0; i < N * C; i++) ck_assert(e1[i] == grpo_bf16_to_f32(c16[i]));
    free(c16), free(h), free(e1), free(e2), free(w16), free(w32), free(bias);
    grpo_backend_close(o);
}
END_TEST

/* ---- models held in bf16 against the same models rounded in fp32 ---------------------------- */

static const char *const bases[] = {"dense/llama", "dense/qwen3", "moe/minimind2"};
static const char *const lora_dirs[] = {"lora/llama", "lora/qwen3", "lora/minimind2"};
static const char *const lora_targets[] = {"all-linear", "all-linear",
                                           "q_proj,v_proj,gate_proj,up_proj,down_proj"};
static const int rslora[] = {0, 1, 0};

typedef struct pair {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *f32, *bf16; /* the same directory: rounded fp32, held in bf16 */
    grpo_safetensors *ref;  /* the fixture's batch */
    grpo_batch b;
    char dir[4096];
} pair;

/* Every tensor of 2+ dimensions of m rounded to bf16 in place (what bf16 storage keeps). */
static void round_matrices(grpo_model *m) {
    grpo_error err;
    grpo_error_init(&err);
    for (uint32_t i = 0; i < m->n_params; i++) {
        if (m->params[i].ndim < 2 || (m->params[i].flags & GRPO_PARAM_TIED)) continue;
        float *x = malloc(m->numel[i] * sizeof(float));
        ck_ok(grpo_model_read_param(m, i, x, &err), &err);
        for (uint64_t k = 0; k < m->numel[i]; k++) x[k] = grpo_bf16_to_f32(grpo_bf16_from_f32(x[k]));
        ck_ok(grpo_model_write_param(m, i, x, &err), &err);
        free(x);
    }
}

static void pair_open(pair *p, int i) {
    grpo_error err;
    grpo_error_init(&err);
    memset(p, 0, sizeof *p);
    p->ops = grpo_backend_open("cpu", 0, &err);
    ck_assert_msg(p->ops != NULL, "%s", err.message);
    p->host = *grpo_default_host();
    p->host.ops = p->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&p->reg, dirs, &err), &err);
    snprintf(p->dir, sizeof p->dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, bases[i]);
    ck_ok(grpo_model_open_dir(&p->f32, &p->reg, &p->host, p->dir, 0, &err), &err);
    round_matrices(p->f32);
    ck_ok(grpo_model_open_dir_as(&p->bf16, &p->reg, &p->host, p->dir, 0, GRPO_DTYPE_BF16, &err),
          &err);
    char path[4200];
    snprintf(path, sizeof path, "%s/reference.safetensors", p->dir);
    ck_ok(grpo_st_open(&p->ref, path, &err), &err);
    const grpo_st_tensor *ids = grpo_st_find(p->ref, "ids");
    p->b = (grpo_batch){sizeof(grpo_batch), (int32_t)ids->shape[0], (int32_t)ids->shape[1],
                        (const int32_t *)ids->data,
                        (const int32_t *)grpo_st_find(p->ref, "mask")->data,
                        (const int32_t *)grpo_st_find(p->ref, "pos")->data,
                        (const int32_t *)grpo_st_find(p->ref, "targets")->data, 0.0f, 0};
    ck_ok(grpo_model_reserve_acts(p->f32, p->b.B, p->b.T, &err), &err);
    ck_ok(grpo_model_reserve_acts(p->bf16, p->b.B, p->b.T, &err), &err);
}

static void pair_close(pair *p) {
    grpo_st_close(p->ref);
    grpo_model_close(p->f32), grpo_model_close(p->bf16);
    grpo_registry_free(&p->reg);
    grpo_backend_close(p->ops);
}

/* logp and entropy of both models agree on every position with a target */
static void expect_same_forward(pair *p, const char *what) {
    grpo_error err;
    grpo_error_init(&err);
    size_t n = (size_t)p->b.B * p->b.T;
    float *l1 = calloc(n, 4), *l2 = calloc(n, 4), *h1 = calloc(n, 4), *h2 = calloc(n, 4);
    ck_ok(grpo_model_forward(p->f32, &p->b, l1, h1, 1.0f, &err), &err);
    ck_ok(grpo_model_forward(p->bf16, &p->b, l2, h2, 1.0f, &err), &err);
    for (size_t k = 0; k < n; k++) {
        if (p->b.targets[k] < 0) continue;
        ck_assert_msg(fabs(l1[k] - l2[k]) < 2e-5 && fabs(h1[k] - h2[k]) < 2e-5,
                      "%s %s: position %zu: logp %.8g vs %.8g, entropy %.8g vs %.8g", p->dir,
                      what, k, l2[k], l1[k], h2[k], h1[k]);
    }
    free(l1), free(l2), free(h1), free(h2);
}

START_TEST(a_model_in_bf16_computes_the_rounded_fp32_model) {
    pair p;
    grpo_error err;
    grpo_error_init(&err);
    pair_open(&p, _i);
    /* half the memory: every matrix takes 2 bytes an element (norms stay fp32) */
    ck_assert_msg(p.bf16->section * 10 < p.f32->section * 6, "%llu vs %llu floats",
                  (unsigned long long)p.bf16->section, (unsigned long long)p.f32->section);
    expect_same_forward(&p, "forward");
    /* prefill logits of the first rows as prompts (left-padded rows of the fixture) */
    int32_t B = p.b.B, T = p.b.T, V = grpo_model_vocab(p.f32);
    int32_t *pm = malloc((size_t)B * T * 4);
    for (int32_t k = 0; k < B * T; k++) pm[k] = 1;
    grpo_batch prompt = p.b;
    prompt.mask = pm; /* every column real: a valid left-padded prompt */
    int32_t *pos = malloc((size_t)B * T * 4);
    for (int32_t k = 0; k < B * T; k++) pos[k] = k % T;
    prompt.pos = pos;
    ck_ok(grpo_model_reserve_kv(p.f32, B, T, T, &err), &err);
    ck_ok(grpo_model_reserve_kv(p.bf16, B, T, T, &err), &err);
    float *g1 = malloc((size_t)B * V * 4), *g2 = malloc((size_t)B * V * 4);
    ck_ok(grpo_model_prefill(p.f32, &prompt, g1, &err), &err);
    ck_ok(grpo_model_prefill(p.bf16, &prompt, g2, &err), &err);
    expect_close("prefill logits", g2, g1, (size_t)B * V, 2e-5, 1e-5);
    free(g1), free(g2), free(pm), free(pos);
    /* saved, it is fp32 again with the bf16 values (what transformers loads) */
    float *a = malloc(p.f32->numel[1] * 4), *c = malloc(p.f32->numel[1] * 4);
    ck_ok(grpo_model_read_param(p.f32, 1, a, &err), &err);
    ck_ok(grpo_model_read_param(p.bf16, 1, c, &err), &err);
    ck_assert(memcmp(a, c, p.f32->numel[1] * 4) == 0);
    free(a), free(c);
    pair_close(&p);
}
END_TEST

START_TEST(lora_on_a_bf16_base_trains_the_same_adapters) {
    pair p;
    grpo_error err;
    grpo_error_init(&err);
    pair_open(&p, _i);
    char adir[4200];
    snprintf(adir, sizeof adir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, lora_dirs[_i]);
    grpo_lora l1, l2;
    grpo_lora_opts o = {4, 8.0, rslora[_i], lora_targets[_i], 0.0};
    ck_ok(grpo_lora_attach(&l1, p.f32, &o, 1, &err), &err);
    ck_ok(grpo_lora_attach(&l2, p.bf16, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&l1, adir, &err), &err);
    ck_ok(grpo_lora_load(&l2, adir, &err), &err);
    ck_ok(grpo_model_reserve_acts(p.f32, p.b.B, p.b.T, &err), &err);
    ck_ok(grpo_model_reserve_acts(p.bf16, p.b.B, p.b.T, &err), &err);
    expect_same_forward(&p, "with adapters");
    const float *dlogp = (const float *)grpo_st_find(p.ref, "dlogp")->data;
    size_t n = (size_t)p.b.B * p.b.T;
    float *lp = calloc(n, 4), *ent = calloc(n, 4), *den = calloc(n, 4);
    for (size_t k = 0; k < n; k++) den[k] = 0.1f * dlogp[k]; /* through the entropy path too */
    grpo_model *ms[2] = {p.f32, p.bf16};
    grpo_lora *ls[2] = {&l1, &l2};
    for (int k = 0; k < 2; k++) {
        grpo_lora_zero_grad(ls[k]);
        ck_ok(grpo_model_forward(ms[k], &p.b, lp, ent, 1.0f, &err), &err);
        ck_ok(grpo_model_backward_entropy(ms[k], &p.b, dlogp, den, ent, 1.0f, &err), &err);
    }
    /* cpu backend: the blocks are host memory; grads follow the params section */
    const float *g1 = l1.block + l1.floats, *g2 = l2.block + l2.floats;
    double worst = 0, scale = 0;
    for (uint64_t k = 0; k < l1.floats; k++) {
        worst = fmax(worst, fabs(g1[k] - g2[k]));
        scale = fmax(scale, fabs(g1[k]));
    }
    ck_assert_msg(scale > 0 && worst <= 1e-5 * scale, "%s: adapter grads differ by %g of %g",
                  p.dir, worst, scale);
    /* adapters off: the bf16 base alone is the reference of a LoRA run */
    ck_ok(grpo_lora_enable(&l1, 0, &err), &err);
    ck_ok(grpo_lora_enable(&l2, 0, &err), &err);
    expect_same_forward(&p, "adapters off");
    free(lp), free(ent), free(den);
    grpo_lora_free(&l1), grpo_lora_free(&l2);
    pair_close(&p);
}
END_TEST

START_TEST(a_bf16_copy_follows_the_fp32_model) {
    pair p;
    grpo_error err;
    grpo_error_init(&err);
    pair_open(&p, 0);
    /* a trained model is fp32 only */
    grpo_model *bad = NULL;
    ck_assert_int_ne(grpo_model_open_dir_as(&bad, &p.reg, &p.host, p.dir, 1, GRPO_DTYPE_BF16,
                                            &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "fp32") != NULL, "%s", err.message);
    /* move the fp32 model's weights, then refresh the copy: it computes the moved model */
    grpo_model *live = NULL;
    ck_ok(grpo_model_open_dir(&live, &p.reg, &p.host, p.dir, 0, &err), &err);
    for (uint32_t i = 0; i < live->n_params; i++) {
        if (live->params[i].ndim < 2 || (live->params[i].flags & GRPO_PARAM_TIED)) continue;
        float *x = malloc(live->numel[i] * 4);
        ck_ok(grpo_model_read_param(live, i, x, &err), &err);
        for (uint64_t k = 0; k < live->numel[i]; k++) x[k] *= 1.01f;
        ck_ok(grpo_model_write_param(live, i, x, &err), &err);
        free(x);
    }
    ck_ok(grpo_model_copy_weights(p.bf16, live, &err), &err);
    ck_ok(grpo_model_copy_weights(p.f32, live, &err), &err);
    round_matrices(p.f32);
    expect_same_forward(&p, "refreshed");
    grpo_model_close(live);
    pair_close(&p);
}
END_TEST

/* A pack built before 1.5 (no bind_typed) is refused by name, and a pack refuses what it cannot
 * compute with: a 1-D tensor (a norm) in bf16, or matrices in two dtypes. */
START_TEST(what_cannot_be_held_in_bf16_is_refused) {
    pair p;
    grpo_error err;
    grpo_error_init(&err);
    pair_open(&p, 0);
    grpo_model_desc old = *p.f32->desc;
    old.struct_size = (uint32_t)offsetof(grpo_model_desc, bind_typed);
    grpo_model *m = NULL;
    ck_assert_int_eq(grpo_model_open_as(&m, &old, &p.host, p.dir, NULL, 0, GRPO_DTYPE_BF16, &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, old.id) && strstr(err.message, "bind_typed"), "%s",
                  err.message);
    grpo_model *b = p.bf16;
    int32_t *dt = malloc(b->n_params * sizeof *dt);
    memcpy(dt, b->dtype, b->n_params * sizeof *dt);
    uint32_t norm = 0, second = 0;
    while (b->params[norm].ndim != 1) norm++;
    dt[norm] = GRPO_DTYPE_BF16;
    ck_assert_int_eq(b->desc->bind_typed(b->inst, (void *const *)b->param_ptr, dt, NULL, &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, b->params[norm].name) && strstr(err.message, "bf16"), "%s",
                  err.message);
    memcpy(dt, b->dtype, b->n_params * sizeof *dt);
    for (uint32_t i = 0, seen = 0; i < b->n_params; i++)
        if (b->params[i].ndim > 1 && seen++ == 1) second = i;
    dt[second] = GRPO_DTYPE_F32; /* one matrix in fp32 among bf16 ones */
    ck_assert_int_eq(b->desc->bind_typed(b->inst, (void *const *)b->param_ptr, dt, NULL, &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "one dtype"), "%s", err.message);
    free(dt);
    pair_close(&p);
}
END_TEST

Suite *weights_bf16_suite(void);
Suite *weights_bf16_suite(void) {
    Suite *s = suite_create("weights_bf16");
    TCase *tc = tcase_create("bf16");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rounding_is_nearest_even);
    tcase_add_test(tc, typed_ops_equal_the_fp32_ops_on_widened_weights);
    tcase_add_loop_test(tc, a_model_in_bf16_computes_the_rounded_fp32_model, 0, 3);
    tcase_add_loop_test(tc, lora_on_a_bf16_base_trains_the_same_adapters, 0, 3);
    tcase_add_test(tc, a_bf16_copy_follows_the_fp32_model);
    tcase_add_test(tc, what_cannot_be_held_in_bf16_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(weights_bf16_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
