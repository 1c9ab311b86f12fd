/*
 * bench_util.h — the harness shared by the model benchmarks (bench_dense.c, bench_moe.c): clock,
 * random weights, command line, opening a model written to a temp HF directory from the build
 * tree's packs, and the fwd+bwd and decode measurements. Header-only (static inline): every
 * bench/bench_*.c is its own executable, so there is no library to put it in.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/process.h"
#include "host/model_instance.h"
#include "io/safetensors.h"
#include "host/sampler.h"
#include "kernels.h"

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* uniform(-1,1) from a fixed xorshift stream: enough for timing, the same every run. */
static inline float bench_uniform(void) {
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return (float)((s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* Prints "<bench>: <message>" and exits 1. */
static inline void bench_fail(const char *bench, const grpo_error *err) {
    fprintf(stderr, "%s: %s\n", bench, err->message);
    exit(1);
}

/* ---- the command line ---------------------------------------------------------------------- */
typedef struct bench_args {
    int threads, B, T;  /* fwd+bwd of (B,T) tokens on `threads` threads */
    int R, P, NEW;      /* decode: R rows, P-token prompts, NEW new tokens each */
    int steps;          /* timed fwd+bwd steps (>= 1) after one warm-up */
} bench_args;

/* --threads --batch --seq --rows --prompt --new --steps, each followed by an integer. */
static inline bench_args bench_parse_args(int argc, char **argv) {
    bench_args a = {2, 4, 256, 16, 32, 128, 3};
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--threads")) a.threads = v;
        else if (!strcmp(argv[i], "--batch")) a.B = v;
        else if (!strcmp(argv[i], "--seq")) a.T = v;
        else if (!strcmp(argv[i], "--rows")) a.R = v;
        else if (!strcmp(argv[i], "--prompt")) a.P = v;
        else if (!strcmp(argv[i], "--new")) a.NEW = v;
        else if (!strcmp(argv[i], "--steps")) a.steps = v;
    }
    if (a.steps < 1) a.steps = 1;
    return a;
}

/* ---- the model directory ------------------------------------------------------------------- */
/* One tensor of the model file: matrices (d1 > 0) scale * uniform, vectors (norms) 1. The
 * caller owns name; data is malloc'd (freed by bench_write_weights). */
static inline void bench_tensor(grpo_st_out *t, const char *name, int64_t d0, int64_t d1,
                                float scale) {
    t->name = name;
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0, t->shape[1] = d1;
    int64_t n = d0 * (d1 ? d1 : 1);
    float *d = malloc(n * sizeof(float));
    for (int64_t i = 0; i < n; i++) d[i] = d1 ? scale * bench_uniform() : 1.0f;
    t->data = d;
}

/* Writes config_json as dir/config.json. */
static inline int bench_write_config(const char *dir, const char *config_json, grpo_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot write", path);
    fputs(config_json, f);
    fclose(f);
    return GRPO_OK;
}

/* Writes the n tensors t as dir/model.safetensors (F32) and frees their data. */
static inline int bench_write_weights(const char *dir, grpo_st_out *t, int n, grpo_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = grpo_st_write(path, t, n, GRPO_ST_F32, err);
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    return rc;
}

/* Removes what bench_write_config / bench_write_weights wrote, and dir. */
static inline void bench_remove_dir(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
}

/* Opens proc on `backend` (cpu, cuda) at `precision` (GRPO_DTYPE_F32, or GRPO_DTYPE_BF16 on cuda)
 * with `threads` CPU threads and the build tree's packs (<dir of the executable>/../packs).
 * Exits on an error. */
static inline void bench_env_open_on(const char *bench, grpo_process *proc, const char *backend,
                                     int threads, int precision) {
    grpo_error err;
    grpo_error_init(&err);
    char packs_dir[4096] = ".";
    ssize_t len = readlink("/proc/self/exe", packs_dir, sizeof packs_dir - 16);
    if (len > 0) {
        packs_dir[len] = '\0';
        strcpy(strrchr(packs_dir, '/'), "/../packs");
    }
    const char *packs[] = {packs_dir};
    if (grpo_process_open(proc, packs, 1, NULL, threads, &err) != GRPO_OK ||
        grpo_process_backend(proc, backend, threads, precision, &err) != GRPO_OK)
        bench_fail(bench, &err);
}

/* bench_env_open_on the CPU backend in f32. */
static inline void bench_env_open(const char *bench, grpo_process *proc, int threads) {
    bench_env_open_on(bench, proc, "cpu", threads, GRPO_DTYPE_F32);
}

/* Opens the model in dir by its architecture (bench_env_open), trainable, with activations for
 * (B,T). */
static inline grpo_model *bench_open(const char *bench, grpo_process *proc, const char *dir,
                                     const bench_args *a) {
    grpo_error err;
    grpo_error_init(&err);
    bench_env_open(bench, proc, a->threads);
    grpo_model *m = NULL;
    if (grpo_model_open_dir(&m, &proc->reg, &proc->host, dir, 1, &err) != GRPO_OK ||
        grpo_model_reserve_acts(m, a->B, a->T, &err) != GRPO_OK)
        bench_fail(bench, &err);
    return m;
}

/* ---- the measurements ---------------------------------------------------------------------- */
/* n bytes of the model's backend memory holding host's (the model API takes backend memory:
 * device memory on a GPU backend, grpo/model.h). Exits when out of memory. */
static inline void *bench_upload(const char *bench, const grpo_ops *o, const void *host,
                                 uint64_t bytes) {
    void *d = o->alloc(o->ctx, bytes);
    if (!d) {
        fprintf(stderr, "%s: backend out of memory for %llu bytes\n", bench,
                (unsigned long long)bytes);
        exit(1);
    }
    o->upload(o->ctx, d, host, bytes);
    return d;
}

/* Best seconds of a->steps forward + backward steps (after one warm-up) of (B,T) tokens of a
 * vocab of V: log-probs of the next tokens, d logp = 1/N, aux_weight for MoE aux losses. The
 * batch, logp and dlogp are uploaded to the backend once, before the clock, as a trainer's
 * micro-batch is; a step is forward + backward on them. */
static inline double bench_fwd_bwd(const char *bench, grpo_model *m, const bench_args *a,
                                   int V, float aux_weight) {
    int B = a->B, T = a->T, N = B * T;
    const grpo_ops *o = m->ops;
    grpo_error err;
    grpo_error_init(&err);
    int32_t *ids = malloc(N * 4), *mask = malloc(N * 4), *pos = malloc(N * 4), *tgt = malloc(N * 4);
    float *dlogp = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)(i * 7919 % V), mask[i] = 1, pos[i] = i % T;
        tgt[i] = i % T + 1 < T ? (int32_t)((i + 1) * 7919 % V) : -1, dlogp[i] = 1.0f / N;
    }
    void *dev[6] = {bench_upload(bench, o, ids, N * 4), bench_upload(bench, o, mask, N * 4),
                    bench_upload(bench, o, pos, N * 4), bench_upload(bench, o, tgt, N * 4),
                    bench_upload(bench, o, dlogp, N * 4), bench_upload(bench, o, dlogp, N * 4)};
    float *d_logp = dev[4], *d_dlogp = dev[5]; /* logp: any values, forward overwrites them */
    grpo_batch b = {sizeof b, B, T, dev[0], dev[1], dev[2], dev[3], aux_weight, 0};
    double best = 1e30;
    for (int s = 0; s <= a->steps; s++) { /* step 0 warms up */
        double t0 = bench_now();
        grpo_model_zero_grad(m);
        if (grpo_model_forward(m, &b, d_logp, NULL, 1.0f, &err) ||
            grpo_model_backward(m, &b, d_dlogp, 1.0f, &err))
            bench_fail(bench, &err);
        o->sync(o->ctx); /* a GPU backend queues the backward */
        double dt = bench_now() - t0;
        if (s > 0 && dt < best) best = dt;
    }
    for (int i = 0; i < 6; i++) o->free(o->ctx, dev[i]);
    free(ids), free(mask), free(pos), free(tgt), free(dlogp);
    return best;
}

/* Prints the fwd+bwd line: seconds per step, tokens/s and FLOP/s for flops per step. */
static inline void bench_print_fwd_bwd(const bench_args *a, double best, double flops) {
    int N = a->B * a->T;
    printf("fwd+bwd (%d,%d): %.3f s/step, %.0f tokens/s, %.1f GFLOP/s (best of %d)\n", a->B, a->T,
           best, N / best, flops / best / 1e9, a->steps);
}

/* The decode workload: the sampler (greedy, G = 1) on R rows of P-token prompts, NEW new tokens
 * each (no EOS, so every row runs to NEW). Exits on an error. */
static inline void bench_generate(const char *bench, grpo_model *m, int R, int P, int NEW, int V) {
    grpo_error err;
    grpo_error_init(&err);
    int32_t *prompt = malloc((size_t)R * P * 4), *pmask = malloc((size_t)R * P * 4);
    for (int i = 0; i < R * P; i++) prompt[i] = (int32_t)(i * 104729 % V), pmask[i] = 1;
    grpo_sampler_opts so = {{0.0f, 0, 1.0f, 0.0f, 1.0f}, 1, NEW, {0}, 0, 0, 0, NULL, NULL, NULL, 0, 0};
    grpo_rollout roll = {0};
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    if (grpo_sampler_run(m, &so, prompt, pmask, R, P, &rng, &roll, &err)) bench_fail(bench, &err);
    grpo_rollout_free(&roll);
    free(prompt), free(pmask);
}

/* bench_generate of R rows: P-token prompts + NEW new tokens each; prints new tokens/s over the
 * whole call (prefill included). */
static inline void bench_decode(const char *bench, grpo_model *m, const bench_args *a, int V) {
    int R = a->R, P = a->P, NEW = a->NEW;
    double t0 = bench_now();
    bench_generate(bench, m, R, P, NEW, V);
    double dt = bench_now() - t0;
    printf("decode %d rows, prompt %d, %d new: %.2f s, %.0f new tokens/s\n", R, P, NEW, dt,
           (double)R * NEW / dt);
}

#endif
