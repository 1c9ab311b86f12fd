/*
 * test_model_conformance.c — one suite run against every model the build's packs serve
 * (GRPO_PACK_BUILD_DIR's registry): each model entry, with each tiny config below whose
 * architecture it serves and whose config.json its create() accepts (a "subject"), gets a random
 * model written to a temporary Hugging Face directory and opened through the host
 * (core/model.h). Per subject:
 *   - params:   n_params() > 0 and stable across calls and instances; names unique; 1 <= ndim <=
 *               4 and every dimension > 0; a TIED tensor names an earlier, untied tensor of the
 *               same shape.
 *   - padding:  forward log-probs are finite, and a left-padded row's equal those of the same
 *               tokens forwarded alone without padding (|diff| <= 1e-5: the same math per row;
 *               only the blocking inside a kernel may change with the batch shape).
 *   - gradient: backward of loss = sum(w * logp) + aux_weight * aux_loss() (aux_loss when the
 *               model has one) against central differences (eps 1e-2 on a weight, float32
 *               model, loss summed in double): per tensor, the entry of largest |grad| and a
 *               random +-1 direction over the whole tensor; |fd - grad| <= 2e-3 + 2e-2 |grad|
 *               (float32 rounding of the loss over 2*eps is ~1e-4; the O(eps^2) truncation of
 *               the central difference of these smooth functions stays below 1e-3).
 *   - shapes:   backward() with no forward() before it, or after the forward() of a batch of
 *               another shape, is refused naming backward.
 *   - decode:   prefill + one-token decode steps (left-padded prompts, teacher forced) give the
 *               log-probs of the full forward at the same columns (|diff| <= 1e-4: attention
 *               over the cache sums in another order than the full causal attention).
 *   - save:     save -> open of the saved directory reproduces the log-probs bit for bit.
 *   - config:   create() refuses malformed config.json (not JSON, no hidden_size, heads that do
 *               not divide hidden_size) with a one-line message (naming the key where one is
 *               missing).
 * A model entry that accepts none of the tiny configs fails the suite: a new pack adds its tiny
 * config to `tinies` below. Tiny sizes (hidden 32, 2 layers, vocab 64) keep it well under 20 s.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/host.h"
#include "kernels.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "io/safetensors.h"

#define V_TINY 64

/* Tiny configs, one or more per architecture a pack serves. Common attention sizes: hidden 32,
 * 4 heads of 8, 2 kv heads, 2 layers. */
#define ATTN "\"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, " \
             "\"num_hidden_layers\": 2, \"vocab_size\": 64, \"hidden_act\": \"silu\", "
static const struct {
    const char *arch, *json;
} tinies[] = {
    {"LlamaForCausalLM", "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
                         ATTN "\"intermediate_size\": 48, \"tie_word_embeddings\": false}"},
    {"Qwen2ForCausalLM", "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", "
                         ATTN "\"intermediate_size\": 48, \"tie_word_embeddings\": true}"},
    {"Qwen3ForCausalLM", "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
                         ATTN "\"intermediate_size\": 48, \"attention_bias\": true}"},
    {"MiniMindForCausalLM", "{\"architectures\": [\"MiniMindForCausalLM\"], \"model_type\": "
                            "\"minimind\", " ATTN "\"intermediate_size\": 48}"},
    {"MiniMindForCausalLM", "{\"architectures\": [\"MiniMindForCausalLM\"], \"model_type\": "
                            "\"minimind\", " ATTN "\"intermediate_size\": 24, \"use_moe\": true, "
                            "\"n_routed_experts\": 4, \"num_experts_per_tok\": 2, "
                            "\"n_shared_experts\": 1, \"aux_loss_alpha\": 0.1}"},
    {"Qwen3MoeForCausalLM", "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": "
                            "\"qwen3_moe\", " ATTN "\"num_experts\": 4, "
                            "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 16, "
                            "\"norm_topk_prob\": true, "
                            "\"router_aux_loss_coef\": 0.05}"},
};
#define N_TINIES (sizeof tinies / sizeof tinies[0])

/* ---- the subjects ------------------------------------------------------------------------- */

typedef struct subject {
    const grpo_model_desc *desc;
    const char *json;
    char label[160]; /* "dense.causal_lm / Qwen3ForCausalLM #2" */
} subject;

typedef struct world {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    subject s[64];
    int n;
} world;

static void ck_ok(int rc, const grpo_error *err, const char *what) {
    ck_assert_msg(rc == GRPO_OK, "%s: status %d: %s", what, rc, err->message);
}

/* Does the entry serve arch? */
static int serves(const grpo_entry *e, const char *arch) {
    for (int i = 0; i < e->n_architectures; i++)
        if (strcmp(e->architectures[i], arch) == 0) return 1;
    return 0;
}

/* The subjects of one model entry: the tiny configs it serves and accepts. Returns how many. */
static int add_entry(world *w, const grpo_entry *e) {
    grpo_error err;
    grpo_error_init(&err);
    const void *vd = NULL;
    ck_ok(grpo_registry_load(&w->reg, e, &w->host, &vd, &err), &err, e->id);
    const grpo_model_desc *d = vd;
    grpo_config none = {0};
    int added = 0;
    for (size_t t = 0; t < N_TINIES; t++) {
        if (!serves(e, tinies[t].arch)) continue;
        void *inst = NULL;
        int rc = d->create(&w->host, tinies[t].json, &none, &inst, &err);
        if (rc == GRPO_ERR_UNSUPPORTED) continue; /* another pack's flavour of the name */
        ck_ok(rc, &err, tinies[t].json);
        d->destroy(inst);
        ck_assert(w->n < (int)(sizeof w->s / sizeof w->s[0]));
        subject *s = &w->s[w->n++];
        s->desc = d, s->json = tinies[t].json;
        snprintf(s->label, sizeof s->label, "%s / %s #%zu", d->id, tinies[t].arch, t);
        added++;
    }
    return added;
}

static void world_open(world *w) {
    grpo_error err;
    grpo_error_init(&err);
    memset(w, 0, sizeof *w);
    w->ops = grpo_backend_open("cpu", 1, &err);
    ck_assert_msg(w->ops != NULL, "%s", err.message);
    w->host = *grpo_default_host();
    w->host.ops = w->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&w->reg, dirs, &err), &err, GRPO_PACK_BUILD_DIR);
    int models = 0;
    for (int p = 0; p < w->reg.n_packs; p++)
        for (int i = 0; i < w->reg.packs[p]->n_entries; i++) {
            const grpo_entry *e = &w->reg.packs[p]->entries[i];
            if (e->kind != GRPO_KIND_MODEL) continue;
            models++;
            ck_assert_msg(add_entry(w, e) > 0,
                          "model %s accepts none of the conformance suite's tiny configs: add one "
                          "for an architecture it serves to tinies[] in %s", e->id, __FILE__);
        }
    ck_assert_msg(models >= 2, "expected the dense and moe model packs under %s, found %d models",
                  GRPO_PACK_BUILD_DIR, models);
}

static void world_close(world *w) {
    grpo_registry_free(&w->reg);
    grpo_backend_close(w->ops);
}

/* ---- a random model on disk --------------------------------------------------------------- */

/* xorshift64*: the test's own deterministic stream. */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static float uniform(uint64_t *s) { return (float)((rng_next(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

static uint64_t numel_of(const grpo_param_desc *d) {
    uint64_t n = 1;
    for (int j = 0; j < d->ndim; j++) n *= (uint64_t)d->shape[j];
    return n;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* Writes s's config.json and random weights (matrices U(-0.3,0.3), vectors 1 + U(-0.2,0.2)) to
 * a new temporary directory (dir, 64 bytes), then opens it trainable. */
static grpo_model *make_model(world *w, const subject *s, char *dir) {
    grpo_error err;
    grpo_error_init(&err);
    snprintf(dir, 64, "/tmp/grpo_test_conformance_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
    write_text(dir, "config.json", s->json);
    grpo_config none = {0};
    void *inst = NULL;
    ck_ok(s->desc->create(&w->host, s->json, &none, &inst, &err), &err, s->label);
    uint32_t n = s->desc->n_params(inst);
    grpo_st_out *outs = calloc(n, sizeof *outs);
    float **bufs = calloc(n, sizeof *bufs);
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        grpo_param_desc d = {sizeof d, 0, 0, {0}, 0, -1};
        ck_ok(s->desc->param(inst, i, &d), &err, s->label);
        if (d.flags & GRPO_PARAM_TIED) continue;
        uint64_t ne = numel_of(&d);
        float *b = bufs[k] = malloc(ne * sizeof(float));
        for (uint64_t j = 0; j < ne; j++)
            b[j] = d.ndim == 1 ? 1.0f + 0.2f * uniform(&seed) : 0.3f * uniform(&seed);
        outs[k].name = d.name, outs[k].data = b, outs[k].ndim = d.ndim;
        for (int j = 0; j < d.ndim; j++) outs[k].shape[j] = d.shape[j];
        k++;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_ok(grpo_st_write(path, outs, k, GRPO_ST_F32, &err), &err, path);
    for (size_t i = 0; i < k; i++) free(bufs[i]);
    free(bufs), free(outs);
    s->desc->destroy(inst);
    grpo_model *m = NULL;
    ck_ok(grpo_model_open(&m, s->desc, &w->host, dir, NULL, 1, &err), &err, s->label);
    return m;
}

static void remove_dir(const char *dir) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}

/* Runs check on a fresh random model of every subject (dir: the model's directory). */
typedef void (*model_check)(world *w, const subject *s, grpo_model *m, const char *dir);
static void each_model(model_check check) {
    world w;
    world_open(&w);
    for (int k = 0; k < w.n; k++) {
        char dir[64];
        grpo_model *m = make_model(&w, &w.s[k], dir);
        check(&w, &w.s[k], m, dir);
        grpo_model_close(m);
        remove_dir(dir);
    }
    world_close(&w);
}

/* ---- batches ------------------------------------------------------------------------------ */

/* A (B,T) batch in host memory (the CPU backend reads it directly). */
typedef struct batch {
    int32_t B, T;
    int32_t *ids, *mask, *pos, *targets;
    float aux_weight;
} batch;

static batch batch_new(int32_t B, int32_t T) {
    size_t n = (size_t)B * T;
    batch b = {B, T, calloc(n, 4), calloc(n, 4), calloc(n, 4), calloc(n, 4), 0.0f};
    return b;
}

static void batch_free(batch *b) { free(b->ids), free(b->mask), free(b->pos), free(b->targets); }

/* Row r = tokens (len), left-padded with T - len pads (id 0, mask 0); positions count real
 * tokens; targets the next token, -1 on padding and the last column. */
static void batch_row(batch *b, int32_t r, const int32_t *tokens, int32_t len) {
    int32_t pad = b->T - len;
    for (int32_t t = 0; t < b->T; t++) {
        size_t i = (size_t)r * b->T + t;
        int real = t >= pad;
        b->ids[i] = real ? tokens[t - pad] : 0;
        b->mask[i] = real;
        b->pos[i] = real ? t - pad : 0;
        b->targets[i] = real && t + 1 < b->T ? tokens[t - pad + 1] : -1;
    }
}

static grpo_batch view(const batch *b) {
    grpo_batch g = {sizeof(grpo_batch), b->B,       b->T,         b->ids,
                    b->mask,            b->pos,     b->targets,   b->aux_weight, 0};
    return g;
}

/* logp (B,T) of a forward of b through m (reserving its activations). */
static void forward(grpo_model *m, const batch *b, float *logp, const char *label) {
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_model_reserve_acts(m, b->B, b->T, &err), &err, label);
    grpo_batch g = view(b);
    ck_ok(grpo_model_forward(m, &g, logp, NULL, 1.0f, &err), &err, label);
}

static const int32_t seq_a[] = {5, 17, 42, 8, 33, 61, 2, 29, 11, 50};
static const int32_t seq_b[] = {40, 3, 27, 63, 14, 9, 55, 21};

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(param_table_is_consistent) {
    world w;
    world_open(&w);
    grpo_error err;
    grpo_error_init(&err);
    for (int k = 0; k < w.n; k++) {
        const subject *s = &w.s[k];
        grpo_config none = {0};
        void *a = NULL, *b = NULL;
        ck_ok(s->desc->create(&w.host, s->json, &none, &a, &err), &err, s->label);
        ck_ok(s->desc->create(&w.host, s->json, &none, &b, &err), &err, s->label);
        uint32_t n = s->desc->n_params(a);
        ck_assert_msg(n > 0 && n == s->desc->n_params(a) && n == s->desc->n_params(b),
                      "%s: n_params not stable (%u)", s->label, n);
        grpo_param_desc *d = calloc(n, sizeof *d);
        for (uint32_t i = 0; i < n; i++) {
            grpo_param_desc e = {sizeof e, 0, 0, {0}, 0, -1};
            d[i] = e;
            ck_ok(s->desc->param(a, i, &d[i]), &err, s->label);
            ck_ok(s->desc->param(b, i, &e), &err, s->label);
            ck_assert_msg(d[i].name && d[i].name[0], "%s: tensor %u has no name", s->label, i);
            ck_assert_msg(strcmp(d[i].name, e.name) == 0 && d[i].ndim == e.ndim,
                          "%s: tensor %u differs between two instances", s->label, i);
            ck_assert_msg(d[i].ndim >= 1 && d[i].ndim <= 4, "%s: %s has ndim %d", s->label,
                          d[i].name, d[i].ndim);
            for (int j = 0; j < d[i].ndim; j++)
                ck_assert_msg(d[i].shape[j] > 0 && d[i].shape[j] == e.shape[j],
                              "%s: %s dimension %d is %lld", s->label, d[i].name, j,
                              (long long)d[i].shape[j]);
            for (uint32_t j = 0; j < i; j++)
                ck_assert_msg(strcmp(d[i].name, d[j].name) != 0, "%s: %s listed twice",
                              s->label, d[i].name);
            /* 1.3: a pack hints how every tensor it owns is initialised (grpo/model.h) */
            uint32_t hint = d[i].flags & GRPO_PARAM_INIT_MASK;
            ck_assert_msg((d[i].flags & GRPO_PARAM_TIED) ||
                              (hint >= GRPO_PARAM_INIT_NORMAL && hint <= GRPO_PARAM_INIT_ZEROS),
                          "%s: %s has no init hint", s->label, d[i].name);
            if (!(d[i].flags & GRPO_PARAM_TIED)) continue;
            int32_t t = d[i].tied_to;
            ck_assert_msg(t >= 0 && (uint32_t)t < i && !(d[t].flags & GRPO_PARAM_TIED),
                          "%s: %s is tied to %d, expected an earlier untied tensor", s->label,
                          d[i].name, t);
            ck_assert_msg(d[t].ndim == d[i].ndim && numel_of(&d[t]) == numel_of(&d[i]),
                          "%s: %s is tied to %s of another shape", s->label, d[i].name,
                          d[t].name);
        }
        ck_assert_msg(s->desc->param(a, n, &d[0]) != GRPO_OK, "%s: param(n) accepted", s->label);
        /* 1.3: vocab_size() is the rows of the input embedding (tensor 0 of a decoder) */
        ck_assert_msg(GRPO_HAS_FIELD(s->desc, grpo_model_desc, vocab_size) && s->desc->vocab_size,
                      "%s: no vocab_size()", s->label);
        ck_assert_msg(s->desc->param(a, 0, &d[0]) == GRPO_OK &&
                          s->desc->vocab_size(a) == d[0].shape[0],
                      "%s: vocab_size() %d, embedding %s has %lld rows", s->label,
                      s->desc->vocab_size(a), d[0].name, (long long)d[0].shape[0]);
        free(d);
        s->desc->destroy(a), s->desc->destroy(b);
    }
    world_close(&w);
}
END_TEST

static void check_left_padding(world *w, const subject *s, grpo_model *m, const char *dir) {
    (void)w, (void)dir; /* unused here */
    /* row 0: 8 tokens of seq_a; row 1: 5 tokens of seq_b after 3 pads */
    batch pb = batch_new(2, 8), alone = batch_new(1, 5);
    batch_row(&pb, 0, seq_a, 8), batch_row(&pb, 1, seq_b, 5), batch_row(&alone, 0, seq_b, 5);
    float lp[16], la[5];
    forward(m, &pb, lp, s->label);
    forward(m, &alone, la, s->label);
    double worst = 0;
    for (int i = 0; i < 16; i++)
        ck_assert_msg(isfinite(lp[i]) && lp[i] <= 0, "%s: logp[%d] = %g", s->label, i,
                      lp[i]);
    for (int t = 0; t < 5; t++) worst = fmax(worst, fabs(lp[8 + 3 + t] - la[t]));
    if (getenv("GRPO_TEST_VERBOSE")) printf("%-40s padded vs alone %.3g\n", s->label, worst);
    ck_assert_msg(worst <= 1e-5, "%s: a left-padded row's logp differ from the unpadded "
                  "row's by %g", s->label, worst);
    batch_free(&pb), batch_free(&alone);
}

START_TEST(left_padding_does_not_change_logp) { each_model(check_left_padding); }
END_TEST

/* loss = sum(w * logp) (+ aux_weight * aux_loss()), in double. */
static double loss_of(grpo_model *m, const batch *b, const float *wt, const char *label) {
    float logp[64];
    forward(m, b, logp, label);
    double l = 0;
    for (int32_t i = 0; i < b->B * b->T; i++) l += (double)wt[i] * logp[i];
    if (m->desc->aux_loss) l += (double)b->aux_weight * m->desc->aux_loss(m->inst);
    return l;
}

/* Central difference of the loss along dir (n floats) added to tensor i (eps * dir). */
static double central_difference(grpo_model *m, const batch *b, const float *wt, uint32_t i,
                                 const float *dir, double eps, const char *label) {
    float *p = m->param_ptr[i];
    uint64_t n = m->numel[i];
    float *keep = malloc(n * sizeof(float));
    memcpy(keep, p, n * sizeof(float));
    for (uint64_t j = 0; j < n; j++) p[j] = keep[j] + (float)(eps * dir[j]);
    double up = loss_of(m, b, wt, label);
    for (uint64_t j = 0; j < n; j++) p[j] = keep[j] - (float)(eps * dir[j]);
    double down = loss_of(m, b, wt, label);
    memcpy(p, keep, n * sizeof(float));
    free(keep);
    return (up - down) / (2 * eps);
}

/* A central difference trusted only where the loss is smooth: at eps and eps/2 it must agree
 * (within the tolerance); across a kink (a mixture of experts' top-k choice flipping inside the
 * step) the difference grows as 1/eps instead. Returns 0 when it is not smooth there. */
static int smooth_difference(grpo_model *m, const batch *b, const float *wt, uint32_t i,
                             const float *dir, double eps, double tol, double *fd,
                             const char *label) {
    *fd = central_difference(m, b, wt, i, dir, eps, label);
    double half = central_difference(m, b, wt, i, dir, eps / 2, label);
    return fabs(*fd - half) <= tol;
}

static void check_gradient(world *w, const subject *s, grpo_model *m, const char *dir) {
    (void)w, (void)dir; /* unused here */
    grpo_error err;
    grpo_error_init(&err);
    const double eps = 1e-2, tol_abs = 5e-4, tol_rel = 5e-3;
    batch b = batch_new(2, 6);
    batch_row(&b, 0, seq_a, 6), batch_row(&b, 1, seq_b, 4);
    b.aux_weight = m->desc->aux_loss ? 0.5f : 0.0f;
    float wt[12];
    uint64_t seed = 7;
    for (int i = 0; i < 12; i++) wt[i] = b.targets[i] >= 0 ? uniform(&seed) : 0.0f;
    /* analytic gradients */
    grpo_model_zero_grad(m);
    (void)loss_of(m, &b, wt, s->label);
    grpo_batch g = view(&b);
    ck_ok(grpo_model_backward(m, &g, wt, 1.0f, &err), &err, s->label);
    double worst = 0;
    int checked = 0, kinks = 0;
    for (uint32_t i = 0; i < m->n_params; i++) {
        if (m->params[i].flags & GRPO_PARAM_TIED) continue; /* its grad is its target's */
        uint64_t n = m->numel[i];
        const float *gr = m->grad_ptr[i];
        float *d = calloc(n, sizeof(float)), unit = 1.0f / sqrtf((float)n);
        /* a random unit direction over the whole tensor, then single entries, largest
         * |grad| first (up to 4, until one is smooth) */
        double want = 0, fd = 0;
        for (uint64_t j = 0; j < n; j++) {
            d[j] = (rng_next(&seed) >> 63) ? unit : -unit;
            want += (double)d[j] * gr[j];
        }
        uint64_t tried[5] = {0};
        for (int probe = 0; probe < 5; probe++) {
            if (probe > 0) { /* entry of the next largest |grad| */
                uint64_t jmax = UINT64_MAX;
                for (uint64_t j = 0; j < n; j++) {
                    int seen = 0;
                    for (int q = 1; q < probe; q++) seen |= tried[q] == j;
                    if (!seen && (jmax == UINT64_MAX || fabsf(gr[j]) > fabsf(gr[jmax])))
                        jmax = j;
                }
                if (jmax == UINT64_MAX) break;
                tried[probe] = jmax;
                memset(d, 0, n * sizeof(float));
                d[jmax] = 1.0f, want = gr[jmax];
            }
            double tol = tol_abs + tol_rel * fabs(want);
            if (!smooth_difference(m, &b, wt, i, d, eps, tol, &fd, s->label)) {
                kinks++;
                continue; /* not a derivative there; the next entry */
            }
            if (getenv("GRPO_TEST_VERBOSE"))
                printf("%-40s %-52s %s %.6g fd %.6g\n", s->label, m->params[i].name,
                       probe ? "entry" : "dir", want, fd);
            char where[64] = "along a random direction";
            if (probe) snprintf(where, sizeof where, "at entry %llu",
                                (unsigned long long)tried[probe]);
            ck_assert_msg(fabs(fd - want) <= tol,
                          "%s: gradient of %s %s: %g, finite difference %g", s->label,
                          m->params[i].name, where, want, fd);
            worst = fmax(worst, fabs(fd - want) / tol);
            checked++;
            if (probe > 0) break; /* one smooth entry per tensor */
        }
        free(d);
    }
    ck_assert_msg(kinks * 10 <= checked, "%s: %d of %d finite differences crossed a kink",
                  s->label, kinks, checked + kinks);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("%-40s %d checks, %d kinks skipped, worst error / tolerance %.3g\n", s->label,
               checked, kinks, worst);
    batch_free(&b);
}

START_TEST(backward_matches_finite_differences) { each_model(check_gradient); }
END_TEST

/* backward() uses the activations of the immediately preceding forward() of the same batch
 * (grpo/model.h): one of another shape, or with no forward before it, is refused. */
static void check_backward_batch(world *w, const subject *s, grpo_model *m, const char *dir) {
    (void)w, (void)dir; /* unused here */
    batch two = batch_new(2, 6), one = batch_new(1, 6);
    batch_row(&two, 0, seq_a, 6), batch_row(&two, 1, seq_b, 4), batch_row(&one, 0, seq_a, 6);
    float logp[12], dlogp[12] = {0};
    grpo_error err;
    grpo_error_init(&err);
    grpo_batch g = view(&one);
    ck_assert_msg(grpo_model_reserve_acts(m, 2, 6, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_model_backward(m, &g, dlogp, 1.0f, &err) != GRPO_OK && err.message[0],
                  "%s: backward without a forward was accepted", s->label);
    forward(m, &two, logp, s->label);
    grpo_error_init(&err);
    ck_assert_msg(grpo_model_backward(m, &g, dlogp, 1.0f, &err) != GRPO_OK &&
                      strstr(err.message, "backward"),
                  "%s: backward of a (1,6) batch after a forward of (2,6): \"%s\"", s->label,
                  err.message);
    batch_free(&two), batch_free(&one);
}

START_TEST(backward_refuses_another_batch) { each_model(check_backward_batch); }
END_TEST

/* log_softmax(logits (V))[target] */
static float log_prob(const float *logits, int32_t V, int32_t target) {
    float mx = logits[0];
    for (int32_t v = 1; v < V; v++) mx = fmaxf(mx, logits[v]);
    double s = 0;
    for (int32_t v = 0; v < V; v++) s += exp((double)logits[v] - mx);
    return (float)(logits[target] - mx - log(s));
}

static void check_decode(world *w, const subject *s, grpo_model *m, const char *dir) {
    (void)w, (void)dir; /* unused here */
    grpo_error err;
    grpo_error_init(&err);
    enum { R = 2, P = 5, D = 4, T = P + D, S = T + 2 };
    int32_t V = grpo_model_vocab(m);
    ck_assert_int_eq(V, V_TINY);
    /* the full sequences: row 0 all real, row 1 two pads on the left */
    batch full = batch_new(R, T), prompt = batch_new(R, P);
    batch_row(&full, 0, seq_a, T), batch_row(&full, 1, seq_b, T - 2);
    for (int32_t r = 0; r < R; r++)
        for (int32_t t = 0; t < P; t++) {
            size_t i = (size_t)r * P + t, j = (size_t)r * T + t;
            prompt.ids[i] = full.ids[j], prompt.mask[i] = full.mask[j];
            prompt.pos[i] = full.pos[j], prompt.targets[i] = -1;
        }
    float logp[R * T], logits[R * V_TINY];
    forward(m, &full, logp, s->label);
    ck_ok(grpo_model_reserve_kv(m, R, S, P, &err), &err, s->label);
    grpo_batch g = view(&prompt);
    ck_ok(grpo_model_prefill(m, &g, logits, &err), &err, s->label);
    double worst = 0;
    for (int32_t step = 0;; step++) {
        int32_t col = P - 1 + step; /* the logits just computed are for column col */
        for (int32_t r = 0; r < R; r++) {
            size_t i = (size_t)r * T + col;
            float lp = log_prob(logits + (size_t)r * V, V, full.targets[i]);
            worst = fmax(worst, fabs(lp - logp[i]));
        }
        if (col + 1 >= T - 1) break;
        int32_t tokens[R], pos[R], len[R], cmask[R * S];
        memset(cmask, 0, sizeof cmask);
        for (int32_t r = 0; r < R; r++) {
            size_t i = (size_t)r * T + col + 1;
            tokens[r] = full.ids[i], pos[r] = full.pos[i], len[r] = col + 2;
            for (int32_t c = 0; c <= col + 1; c++) cmask[r * S + c] = full.mask[r * T + c];
        }
        ck_ok(grpo_model_decode(m, R, tokens, pos, cmask, len, logits, &err), &err,
              s->label);
    }
    if (getenv("GRPO_TEST_VERBOSE")) printf("%-40s decode vs forward %.3g\n", s->label, worst);
    ck_assert_msg(worst <= 1e-5, "%s: prefill/decode log-probs differ from forward's by %g",
                  s->label, worst);
    batch_free(&full), batch_free(&prompt);
}

START_TEST(prefill_and_decode_match_forward) { each_model(check_decode); }
END_TEST

static void check_save_and_load(world *w, const subject *s, grpo_model *m, const char *dir) {
    grpo_error err;
    grpo_error_init(&err);
    char saved[128];
    batch b = batch_new(2, 7);
    batch_row(&b, 0, seq_a, 7), batch_row(&b, 1, seq_b, 5);
    float before[14], after[14];
    forward(m, &b, before, s->label);
    snprintf(saved, sizeof saved, "%s/saved", dir);
    ck_ok(grpo_model_save(m, saved, &err), &err, s->label);
    grpo_model *again = NULL;
    ck_ok(grpo_model_open(&again, s->desc, &w->host, saved, NULL, 0, &err), &err, s->label);
    forward(again, &b, after, s->label);
    grpo_model_close(again);
    ck_assert_msg(memcmp(before, after, sizeof before) == 0,
                  "%s: log-probs after save and load differ", s->label);
    batch_free(&b);
}

START_TEST(save_and_load_reproduce_logp) { each_model(check_save_and_load); }
END_TEST

/* s->json with the first occurrence of from replaced by to (caller frees). */
static char *edited(const char *json, const char *from, const char *to) {
    const char *at = strstr(json, from);
    ck_assert_msg(at != NULL, "%s not in %s", from, json);
    size_t n = strlen(json) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
    return out;
}

START_TEST(create_refuses_malformed_config) {
    world w;
    world_open(&w);
    for (int k = 0; k < w.n; k++) {
        const subject *s = &w.s[k];
        struct {
            char *json;
            const char *want; /* in the message */
        } bad[] = {
            {edited(s->json, "}", ""), "config.json"},            /* not JSON: cut short */
            {edited(s->json, "\"hidden_size\": 32, ", ""), "hidden_size"},
            {edited(s->json, "\"num_attention_heads\": 4", "\"num_attention_heads\": 3"),
             "heads"},
        };
        for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
            grpo_error err;
            grpo_error_init(&err);
            grpo_config none = {0};
            void *inst = NULL;
            int rc = s->desc->create(&w.host, bad[c].json, &none, &inst, &err);
            ck_assert_msg(rc != GRPO_OK && inst == NULL, "%s: create accepted %s", s->label,
                          bad[c].json);
            ck_assert_msg(err.message[0] && !strchr(err.message, '\n') &&
                              strstr(err.message, bad[c].want),
                          "%s: case %zu: message \"%s\" should name %s", s->label, c,
                          err.message, bad[c].want);
            free(bad[c].json);
        }
    }
    world_close(&w);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("model_conformance");
    TCase *tc = tcase_create("every_model_pack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, param_table_is_consistent);
    tcase_add_test(tc, left_padding_does_not_change_logp);
    tcase_add_test(tc, backward_matches_finite_differences);
    tcase_add_test(tc, backward_refuses_another_batch);
    tcase_add_test(tc, prefill_and_decode_match_forward);
    tcase_add_test(tc, save_and_load_reproduce_logp);
    tcase_add_test(tc, create_refuses_malformed_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
