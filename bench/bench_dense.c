/*
 * bench_dense.c — speed of the dense plugin on the CPU backend at the MiniMind2-small shape
 * (hidden 512, 8 layers, 8 query / 2 kv heads, intermediate 1408, vocab 6400, tied head).
 *
 *   build/bench/bench_dense [--threads N] [--batch B] [--seq T] [--rows R] [--prompt P]
 *                           [--new N] [--steps S] [--recompute 0|1] [--group G --prefix Q]
 *                           [--matmul-mb MB]
 *   build/bench/bench_dense --stream-mb MB[,MB...]
 * Packs are looked for in <dir of the executable>/../packs (the build tree) and the usual path.
 *
 * Writes a random model (Llama naming, tied) to a temp HF directory, loads it through the
 * registry like any model, then measures:
 *   sgemm      cblas_sgemm (N,512)x(512,1408): the machine's reachable FLOP/s at these shapes
 *   acts       the training activation block of (B,T) without and with activation
 *              recomputation (train.gradient_checkpointing; --recompute 1 times fwd+bwd with it)
 *   fwd+bwd    forward + backward of (B,T) tokens (log-probs of next tokens, d logp = 1/N):
 *              tokens/s and model FLOP/s (6 * matmul params per token + attention, see flops())
 *              With --group G --prefix Q: the rows come in groups of G that share their first Q
 *              tokens (a prompt and its G completions; log-probs of the rest only, as in GRPO),
 *              timed with every row in full and with the prompts computed once
 *              (train.shared_prefix), next to the model FLOPs of each (group_flops)
 *   decode     the sampler (greedy) on R rows: P-token prompts + N new tokens each (no EOS):
 *              new tokens/s over the whole call (prefill included), timed on the second of
 *              two calls, as grpo's rollouts after the first run (the KV pool kept, the
 *              memory touched); the first call's time, with the first touch of its memory
 *              (the kernel zeroing fresh pages), is printed beside it
 *   matmul R   the backend's matmul_forward of R rows at each weight shape of the model, over
 *              copies of w that fill 128 MB (more than the model, as in a decode step; this
 *              machine's 480 MB L3 holds it): GFLOP/s and GB/s of weights read, next to a plain
 *              streaming read of the same 128 MB at 1 and at --threads threads (the roofline
 *              of reading them); wall and CPU time. --matmul-mb MB: copies filling MB instead
 *              (at least the head's 13 MB; 14 keeps them in L3, the kernels' own rate);
 *              --matmul-mb 0: no matmul lines (decode alone, e.g. under perf)
 *   --stream-mb  only the 1-thread streaming read of a buffer of each size (MB), a line each,
 *              then exit: bench_grpo_step.py's decode floors, at each model's working set
 * fwd+bwd and decode are reported twice: by wall time and by the process's CPU time (all its
 * threads), which a shared machine disturbs less (it does not count time the process waits
 * for a core; at 1 thread it is the compute time).
 * Same numbers from PyTorch: bench/bench_dense_torch.py. Results: BENCHMARKS.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_util.h"
#include "host/process.h"
#include "host/model_instance.h"
#include "io/safetensors.h"
#include "cpu/cpu_backend.h"
#include <cblas.h>
#undef I

enum { C = 512, L = 8, NH = 8, NKV = 2, HD = 64, IM = 1408, V = 6400 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 88172645463325252ull;
static float randn_ish(void) { /* uniform(-1,1) is enough for timing */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* A random model of the MiniMind2-small shape as config.json + model.safetensors in dir. */
static int write_model(const char *dir, grpo_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot write", path);
    fprintf(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
               "\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,"
               "\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
               "\"hidden_act\":\"silu\",\"max_position_embeddings\":32768}\n",
            C, L, NH, NKV, IM, V);
    fclose(f);
    const char *names[] = {"input_layernorm.weight", "self_attn.q_proj.weight",
                           "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                           "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                           "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
    const int64_t shapes[9][2] = {{C, 0}, {NH * HD, C}, {NKV * HD, C}, {NKV * HD, C},
                                  {C, NH * HD}, {C, 0}, {IM, C}, {IM, C}, {C, IM}};
    int n = 2 + 9 * L;
    grpo_st_out *t = calloc(n, sizeof *t);
    char(*nm)[96] = calloc(n, sizeof *nm);
    int k = 0;
    for (int l = -1; l <= L; l++)
        for (int j = 0; j < (l < 0 || l == L ? 1 : 9); j++, k++) {
            const int64_t *s = l < 0 ? (const int64_t[2]){V, C} : l == L ? (const int64_t[2]){C, 0}
                                                                             : shapes[j];
            if (l < 0) snprintf(nm[k], 96, "model.embed_tokens.weight");
            else if (l == L) snprintf(nm[k], 96, "model.norm.weight");
            else snprintf(nm[k], 96, "model.layers.%d.%s", l, names[j]);
            t[k].name = nm[k];
            t[k].ndim = s[1] ? 2 : 1;
            t[k].shape[0] = s[0], t[k].shape[1] = s[1];
            int64_t numel = s[0] * (s[1] ? s[1] : 1);
            float *d = malloc(numel * sizeof(float));
            float sc = s[1] ? 1.0f / 22.6f : 0.0f; /* ~1/sqrt(512) for matrices, 1 for norms */
            for (int64_t i = 0; i < numel; i++) d[i] = s[1] ? sc * randn_ish() : 1.0f;
            t[k].data = d;
        }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = grpo_st_write(path, t, n, GRPO_ST_F32, err);
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    free(t), free(nm);
    return rc;
}

/* Model FLOPs per token of the forward: 2 per matmul weight, plus causal attention
 * (q.k and p.v over T/2 keys on average: 2 * 2 * (T/2) * NH*HD per layer). */
static double fwd_flops_per_token(int T) {
    double mm = (double)L * (C * NH * HD * 2 + C * NKV * HD * 2 + 3.0 * C * IM) + (double)C * V;
    return 2 * mm + (double)L * 2 * T * NH * HD;
}

/* FLOP/s of cblas_sgemm (N,512)x(512,1408) by wall time; *cpu_rate by CPU time. */
static double bench_sgemm(int N, double *cpu_rate) {
    float *a = malloc((size_t)N * C * 4), *b = malloc((size_t)IM * C * 4);
    float *c = malloc((size_t)N * IM * 4);
    for (size_t i = 0; i < (size_t)N * C; i++) a[i] = randn_ish();
    for (size_t i = 0; i < (size_t)IM * C; i++) b[i] = randn_ish();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IM, C, 1, a, C, b, C, 0, c, IM);
    int reps = 20;
    double t0 = now(), c0 = cpu_now();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IM, C, 1, a, C, b, C, 0, c, IM);
    double dt = now() - t0, dc = cpu_now() - c0;
    free(a), free(b), free(c);
    *cpu_rate = 2.0 * N * C * IM * reps / dc;
    return 2.0 * N * C * IM * reps / dt;
}

/* 16 floats: one 64-byte line, a vector register where the target has them (generic vector
 * extension; the compiler picks the loads) */
typedef float line16 __attribute__((vector_size(64)));

/* The sum of the lines [i0, i1) of p, four independent sums: one vector load a cache line
 * (compiled for AVX-512, AVX2 or the baseline, chosen at run time), so that the out-of-order
 * window holds many lines in flight. A loop of 64-bit scalar loads (8 a line) read 128 MB at
 * 9 GB/s where this reads it at 20 (and 2 GB at 9 instead of 15, less than the decode kernel
 * itself reached): it measured the loop, not the memory. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static float line_sum(const line16 *p, size_t i0, size_t i1) {
    line16 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = i0;
    for (; i + 4 <= i1; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
    for (; i < i1; i++) a += p[i];
    a += b + c + d;
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += a[k];
    return s;
}

/* Streaming read of n bytes (a multiple of 64, p 64-byte aligned) on `threads` threads, each a
 * contiguous stretch, best of 3: GB/s by wall time, *cpu_rate by CPU time (all threads). */
static double stream_read(const void *p, size_t n, int threads, double *cpu_rate) {
    double best = 1e30, best_cpu = 1e30;
    const size_t lines = n / 64;
    float sum = 0.0f;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now(), c0 = cpu_now();
#pragma omp parallel num_threads(threads)
        {
#ifdef _OPENMP
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            int t = 0, nt = 1;
#endif
            float part = line_sum(p, lines * t / nt, lines * (t + 1) / nt);
#pragma omp atomic
            sum += part;
        }
        double dt = now() - t0, dc = cpu_now() - c0;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    if (sum == 42.0f) printf("(checksum %g)\n", sum); /* keeps the reads */
    *cpu_rate = n / best_cpu / 1e9;
    return n / best / 1e9;
}

/* The 1-thread streaming read of a buffer of each size in list (MB, comma-separated: the
 * working sets of the models a benchmark reads, so that each is measured where it lives, L2,
 * L3 or memory): one line each. */
static void stream_sizes(const char *list) {
    for (const char *q = list; *q;) {
        size_t mb = strtoul(q, NULL, 10), n = mb << 20;
        float *buf = n ? cpu_block(n) : NULL; /* on huge pages, as the CPU backend's memory */
        if (!buf)
            fprintf(stderr, "bench_dense: --stream-mb %zu: no buffer of that size\n", mb);
        else {
            for (size_t i = 0; i < n / 4; i++) buf[i] = randn_ish();
            double cpu, wall = stream_read(buf, n, 1, &cpu);
            printf("stream read of %zu MB, 1 thread: %.1f GB/s, cpu time: %.1f GB/s\n", mb, wall,
                   cpu);
            free(buf);
        }
        q = strchr(q, ',');
        if (!q) break;
        q++;
    }
}

/* matmul_forward of R rows at the model's weight shapes, w cycling through 128 MB of copies:
 * GB/s of weights read, by wall and by CPU time, and as a share of the streaming read at the
 * same thread count (the memory roofline of a decode step). */
static void bench_matmul_rows(const grpo_ops *o, int R, int threads, int mb) {
    const int shapes[5][2] = {{C, NH * HD}, {C, NKV * HD}, {C, IM}, {IM, C}, {C, V}};
    const char *names[5] = {"q, o", "k, v", "gate, up", "down", "head"};
    const size_t pool = (size_t)mb << 20; /* bytes of weight copies */
    float *host = cpu_block(pool), *x = malloc((size_t)R * IM * 4);
    for (size_t i = 0; i < pool / 4; i++) host[i] = randn_ish();
    for (int i = 0; i < R * IM; i++) x[i] = randn_ish();
    double read1_cpu, read1 = stream_read(host, pool, 1, &read1_cpu), read_cpu;
    double read = stream_read(host, pool, threads, &read_cpu);
    printf("stream read of %zu MB, 1 thread: %.1f GB/s, cpu time: %.1f GB/s\n", pool >> 20,
           read1, read1_cpu);
    printf("stream read of %zu MB, %d threads: %.1f GB/s, cpu time: %.1f GB/s\n", pool >> 20,
           threads, read, read_cpu);
    float *w = o->alloc(o->ctx, pool), *dx = o->alloc(o->ctx, (size_t)R * IM * 4);
    float *dy = o->alloc(o->ctx, (size_t)R * V * 4);
    o->upload(o->ctx, w, host, pool);
    o->upload(o->ctx, dx, x, (size_t)R * IM * 4);
    for (int s = 0; s < 5; s++) {
        int IC = shapes[s][0], OC = shapes[s][1];
        size_t nw = (size_t)IC * OC, copies = pool / (nw * 4);
        int calls = 0;
        double t0 = now(), c0 = cpu_now(), dc;
        do {
            o->matmul_forward(o->ctx, dy, dx, w + (calls % copies) * nw, NULL, R, IC, OC);
            o->sync(o->ctx);
            calls++;
            dc = cpu_now() - c0;
        } while (dc < 0.3);
        double dt = now() - t0, gb = 4.0 * nw * calls / 1e9;
        printf("matmul %d rows, %-8s (%4d -> %4d): %7.1f us/call, %5.1f GFLOP/s, %4.1f GB/s of "
               "weights (%3.0f%% of the %d-thread stream read); cpu time: %5.1f GFLOP/s, %4.1f "
               "GB/s (%3.0f%%)\n", R, names[s], IC, OC, dt / calls * 1e6,
               2.0 * R * nw * calls / dt / 1e9, gb / dt, 100 * gb / dt / read, threads,
               2.0 * R * nw * calls / dc / 1e9, gb / dc, 100 * gb / dc / read_cpu);
    }
    o->free(o->ctx, w), o->free(o->ctx, dx), o->free(o->ctx, dy);
    free(host), free(x);
}

/* Best wall and CPU seconds of `steps` forward + backward steps of b (after one warm-up) with
 * shared prefixes of Q columns (0: every row in full). Exits on an error. */
static void time_fwd_bwd(grpo_model *m, const grpo_batch *b, float *logp, const float *dlogp,
                         int steps, int32_t Q, double *best, double *best_cpu) {
    grpo_error err;
    grpo_error_init(&err);
    *best = *best_cpu = 1e30;
    for (int s = 0; steps && s <= steps; s++) { /* step 0 warms up */
        double t0 = now(), c0 = cpu_now();
        grpo_model_zero_grad(m);
        if (grpo_model_set_shared_prefix(m, Q, &err) ||
            grpo_model_forward(m, b, logp, NULL, 1.0f, &err) ||
            grpo_model_backward(m, b, dlogp, 1.0f, &err)) {
            fprintf(stderr, "bench_dense: %s\n", err.message);
            exit(1);
        }
        double dt = now() - t0, dc = cpu_now() - c0;
        if (s > 0 && dt < *best) *best = dt;
        if (s > 0 && dc < *best_cpu) *best_cpu = dc;
    }
}

/* Model FLOPs of one fwd+bwd of B rows of T in groups of G sharing their first Q tokens, the
 * prompts computed once (shared) or per row, log-probs of the completions only (as in GRPO):
 * 3 x the forward's, the layers' matmuls per token computed, attention per (query, key) pair,
 * the head per target. */
static double group_flops(int B, int T, int G, int Q, int shared) {
    double head = 2.0 * C * V, body = fwd_flops_per_token(0) - head;
    double att = (double)L * 4 * NH * HD; /* q.k and p.v, per query-key pair */
    double prompts = shared ? (double)(B + G - 1) / G : B, tc = T - Q;
    double tok = prompts * Q + B * tc;
    double pairs = prompts * Q * (Q + 1) / 2 + B * (tc * Q + tc * (tc + 1) / 2);
    return 3 * (tok * body + pairs * att + B * tc * head);
}

int main(int argc, char **argv) {
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (blas_core.c) */
    int threads = 2, B = 4, T = 256, R = 16, P = 32, NEW = 128, steps = 3, recompute = 0;
    int G = 0, Q = 0, matmul_mb = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--stream-mb")) { /* only these reads, then exit */
            stream_sizes(argv[i + 1]);
            return 0;
        } else if (!strcmp(argv[i], "--threads")) threads = v;
        else if (!strcmp(argv[i], "--batch")) B = v;
        else if (!strcmp(argv[i], "--seq")) T = v;
        else if (!strcmp(argv[i], "--rows")) R = v;
        else if (!strcmp(argv[i], "--prompt")) P = v;
        else if (!strcmp(argv[i], "--new")) NEW = v;
        else if (!strcmp(argv[i], "--steps")) steps = v;
        else if (!strcmp(argv[i], "--recompute")) recompute = v;
        else if (!strcmp(argv[i], "--group")) G = v;
        else if (!strcmp(argv[i], "--prefix")) Q = v;
        else if (!strcmp(argv[i], "--matmul-mb")) matmul_mb = v;
    }
    if (matmul_mb < 0 || (matmul_mb != 0 && (size_t)matmul_mb << 20 < (size_t)C * V * 4)) {
        fprintf(stderr, "bench_dense: --matmul-mb must be 0 or hold the head's weights (13)\n");
        return 1;
    }
    if (G > 0 && !(Q > 0 && Q < T)) {
        fprintf(stderr, "bench_dense: --group needs --prefix Q in (0, --seq)\n");
        return 1;
    }
    if (steps < 0) steps = 0; /* 0: no sgemm, no fwd+bwd (decode and matmul only) */
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_bench_dense_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, &err) != GRPO_OK) {
        fprintf(stderr, "bench_dense: %s\n", err.message);
        return 1;
    }
    char packs_dir[4096] = ".";
    ssize_t len = readlink("/proc/self/exe", packs_dir, sizeof packs_dir - 16);
    if (len > 0) {
        packs_dir[len] = '\0';
        strcpy(strrchr(packs_dir, '/'), "/../packs");
    }
    const char *packs[] = {packs_dir};
    grpo_process proc;
    grpo_model *m = NULL;
    if (grpo_process_open(&proc, packs, 1, "cpu", threads, &err) != GRPO_OK ||
        grpo_model_open_dir(&m, &proc.reg, &proc.host, dir, 1, &err) != GRPO_OK) {
        fprintf(stderr, "bench_dense: %s\n", err.message);
        return 1;
    }
    uint64_t full = m->desc->activation_floats(m->inst, B, T);
    if (grpo_model_set_gradient_checkpointing(m, 1, &err) != GRPO_OK) {
        fprintf(stderr, "bench_dense: %s\n", err.message);
        return 1;
    }
    uint64_t kept = m->desc->activation_floats(m->inst, B, T);
    printf("acts (%d,%d): %.1f MiB, with recomputation %.1f MiB (%.2fx)\n", B, T,
           full * 4.0 / 1048576, kept * 4.0 / 1048576, (double)kept / full);
    if (grpo_model_set_gradient_checkpointing(m, recompute, &err) != GRPO_OK ||
        grpo_model_reserve_acts(m, B, T, &err) != GRPO_OK) {
        fprintf(stderr, "bench_dense: %s\n", err.message);
        return 1;
    }
    printf("shape: hidden %d, layers %d, heads %d/%d, intermediate %d, vocab %d; threads %d\n", C,
           L, NH, NKV, IM, V, threads);
    double sgemm_cpu, sgemm = steps ? bench_sgemm(B * T, &sgemm_cpu) : 0;
    if (steps)
        printf("sgemm (%d,%d)x(%d,%d): %.1f GFLOP/s, cpu time: %.1f GFLOP/s\n", B * T, C, C, IM,
               sgemm / 1e9, sgemm_cpu / 1e9);

    int N = B * T;
    int32_t *ids = malloc(N * 4), *mask = malloc(N * 4), *pos = malloc(N * 4), *tgt = malloc(N * 4);
    float *logp = malloc(N * 4), *dlogp = malloc(N * 4);
    for (int i = 0; i < N; i++) { /* with --group: a row's first Q tokens are its group's */
        int src = G > 0 && i % T < Q ? i / T / G * G * T + i % T : i;
        ids[i] = (int32_t)(src * 7919 % V), mask[i] = 1, pos[i] = i % T;
        tgt[i] = i % T + 1 < T ? (int32_t)((i + 1) * 7919 % V) : -1, dlogp[i] = 1.0f / N;
        if (G > 0 && i % T < Q - 1) tgt[i] = -1; /* GRPO: log-probs of the completions only */
    }
    grpo_batch b = {sizeof b, B, T, ids, mask, pos, tgt, 0.0f, 0};
    double best, best_cpu;
    time_fwd_bwd(m, &b, logp, dlogp, steps, 0, &best, &best_cpu);
    double flops = 3 * fwd_flops_per_token(T) * N;
    if (steps && recompute) printf("fwd+bwd with activation recomputation\n");
    if (steps)
        printf("fwd+bwd (%d,%d): %.3f s/step, %.0f tokens/s, %.1f GFLOP/s (best of %d)\n"
               "fwd+bwd (%d,%d) cpu time: %.3f s/step, %.0f tokens/s, %.1f GFLOP/s (best of %d)\n",
               B, T, best, N / best, flops / best / 1e9, steps, B, T, best_cpu, N / best_cpu,
               flops / best_cpu / 1e9, steps);
    if (steps && G > 0) {
        double sb, sb_cpu, f0 = group_flops(B, T, G, Q, 0), f1 = group_flops(B, T, G, Q, 1);
        time_fwd_bwd(m, &b, logp, dlogp, steps, Q, &sb, &sb_cpu);
        printf("fwd+bwd (%d,%d), groups of %d sharing %d tokens: in full %.3f s (cpu %.3f s), "
               "prompts once %.3f s (cpu %.3f s): %.2fx wall, %.2fx cpu; model FLOPs %.1f -> "
               "%.1f GFLOP (%.2fx)\n",
               B, T, G, Q, best, best_cpu, sb, sb_cpu, best / sb, best_cpu / sb_cpu, f0 / 1e9,
               f1 / 1e9, f0 / f1);
    }

    double c0 = cpu_now();
    bench_generate("bench_dense", m, R, P, NEW, V); /* cold: the memory's first touch */
    double cold = cpu_now() - c0, t0 = now();
    c0 = cpu_now();
    bench_generate("bench_dense", m, R, P, NEW, V);
    double dt = now() - t0, dc = cpu_now() - c0;
    printf("decode %d rows, prompt %d, %d new: %.2f s, %.0f new tokens/s (first call %.2f cpu s)\n",
           R, P, NEW, dt, (double)R * NEW / dt, cold);
    printf("decode %d rows, prompt %d, %d new cpu time: %.2f s, %.0f new tokens/s\n", R, P, NEW,
           dc, (double)R * NEW / dc);

    if (matmul_mb) bench_matmul_rows(proc.ops, R, threads, matmul_mb);

    grpo_model_close(m);
    grpo_process_close(&proc);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
    free(ids), free(mask), free(pos), free(tgt), free(logp), free(dlogp);
    return 0;
}
