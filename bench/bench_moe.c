/*
 * bench_moe.c — speed of the MoE plugin on the CPU backend at the MiniMind2-MoE shape (hidden
 * 640, 8 layers, 8 query / 2 kv heads, expert intermediate 1728, 4 routed experts top-2 + 1 shared,
 * vocab 6400, tied head, seq_aux).
 *
 *   bench_moe [--threads N] [--batch B] [--seq T] [--rows R] [--prompt P] [--new N] [--steps S]
 *
 * Writes a random model (MiniMind2 MoE naming) to a temp HF directory, opens it by architecture
 * from the build tree's packs (moe.causal_lm), then measures:
 *   fwd+bwd  forward + backward of (B,T) tokens (log-probs of next tokens, d logp = 1/N, plus the
 *            aux loss with aux_weight 1): tokens/s and active-parameter FLOP/s (see flops())
 *   decode   grpo_model_generate of R rows: P-token prompts + N new tokens each (no EOS)
 * The same from PyTorch: bench/bench_moe_torch.py. Results: BENCHMARKS.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "safetensors.h"

enum { C = 640, L = 8, NH = 8, NKV = 2, HD = 80, IM = 1728, E = 4, K = 2, NS = 1, V = 6400 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 88172645463325252ull;
static float uniform(void) { /* uniform(-1,1) is enough for timing */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* One tensor of the model file: matrices uniform / sqrt(in), vectors (norms) 1. */
static void tensor(grpo_st_out *t, char *name, int64_t d0, int64_t d1) {
    t->name = name;
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0, t->shape[1] = d1;
    int64_t n = d0 * (d1 ? d1 : 1);
    float *d = malloc(n * sizeof(float));
    for (int64_t i = 0; i < n; i++) d[i] = d1 ? uniform() * 1.7f / 25.3f : 1.0f;
    t->data = d;
}

static int write_model(const char *dir, grpo_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot write", path);
    fprintf(f, "{\"architectures\":[\"MiniMindForCausalLM\"],\"model_type\":\"minimind\","
               "\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,"
               "\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\","
               "\"use_moe\":true,\"n_routed_experts\":%d,\"num_experts_per_tok\":%d,"
               "\"n_shared_experts\":%d,\"scoring_func\":\"softmax\",\"aux_loss_alpha\":0.1,"
               "\"seq_aux\":true,\"norm_topk_prob\":true}\n",
            C, L, NH, NKV, IM, V, E, K, NS);
    fclose(f);
    int per_layer = 7 + 3 * (E + NS), n = 2 + L * per_layer, k = 0;
    grpo_st_out *t = calloc(n, sizeof *t);
    char(*nm)[96] = calloc(n, sizeof *nm);
    snprintf(nm[k], 96, "model.embed_tokens.weight"), tensor(&t[k], nm[k], V, C), k++;
    for (int l = 0; l < L; l++) {
        const char *names[7] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                "self_attn.v_proj", "self_attn.o_proj",
                                "post_attention_layernorm", "mlp.gate"};
        const int64_t shapes[7][2] = {{C, 0}, {NH * HD, C}, {NKV * HD, C}, {NKV * HD, C},
                                      {C, NH * HD}, {C, 0}, {E, C}};
        for (int j = 0; j < 7; j++, k++) {
            snprintf(nm[k], 96, "model.layers.%d.%s.weight", l, names[j]);
            tensor(&t[k], nm[k], shapes[j][0], shapes[j][1]);
        }
        for (int e = 0; e < E + NS; e++) {
            const char *kind = e < E ? "experts" : "shared_experts";
            int idx = e < E ? e : e - E;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.gate_proj.weight", l, kind, idx);
            tensor(&t[k], nm[k], IM, C), k++;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.up_proj.weight", l, kind, idx);
            tensor(&t[k], nm[k], IM, C), k++;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.down_proj.weight", l, kind, idx);
            tensor(&t[k], nm[k], C, IM), k++;
        }
    }
    snprintf(nm[k], 96, "model.norm.weight"), tensor(&t[k], nm[k], C, 0), k++;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = grpo_st_write(path, t, n, GRPO_ST_F32, err);
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    free(t), free(nm);
    return rc;
}

/* Model FLOPs per token of the forward over the ACTIVE parameters: 2 per matmul weight a token
 * touches (attention, router, K routed + NS shared experts, head), plus causal attention
 * (2 * 2 * (T/2) * NH*HD per layer). */
static double fwd_flops_per_token(int T) {
    double mm = (double)L * (C * NH * HD * 2 + C * NKV * HD * 2 + (double)E * C +
                             3.0 * C * IM * (K + NS)) + (double)C * V;
    return 2 * mm + (double)L * 2 * T * NH * HD;
}

int main(int argc, char **argv) {
    int threads = 2, B = 4, T = 256, R = 16, P = 32, NEW = 128, steps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--threads")) threads = v;
        else if (!strcmp(argv[i], "--batch")) B = v;
        else if (!strcmp(argv[i], "--seq")) T = v;
        else if (!strcmp(argv[i], "--rows")) R = v;
        else if (!strcmp(argv[i], "--prompt")) P = v;
        else if (!strcmp(argv[i], "--new")) NEW = v;
        else if (!strcmp(argv[i], "--steps")) steps = v;
    }
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_bench_moe_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, &err) != GRPO_OK) {
        fprintf(stderr, "bench_moe: %s\n", err.message);
        return 1;
    }
    char packs_dir[4096] = "."; /* the build tree's packs: <build>/bench/../packs */
    ssize_t len = readlink("/proc/self/exe", packs_dir, sizeof packs_dir - 16);
    if (len > 0) {
        packs_dir[len] = '\0';
        strcpy(strrchr(packs_dir, '/'), "/../packs");
    }
    const char *packs[] = {packs_dir};
    grpo_model_env env;
    grpo_model *m = NULL;
    if (grpo_model_env_open(&env, "cpu", threads, packs, 1, &err) != GRPO_OK ||
        grpo_model_open_dir(&m, &env.reg, &env.host, dir, 1, &err) != GRPO_OK ||
        grpo_model_reserve_acts(m, B, T, &err) != GRPO_OK) {
        fprintf(stderr, "bench_moe: %s\n", err.message);
        return 1;
    }
    const grpo_model_desc *desc = m->desc; /* moe.causal_lm: dense refuses use_moe */
    printf("shape: hidden %d, layers %d, heads %d/%d, expert intermediate %d, %d routed top-%d + "
           "%d shared, vocab %d; threads %d\n", C, L, NH, NKV, IM, E, K, NS, V, threads);

    int N = B * T;
    int32_t *ids = malloc(N * 4), *mask = malloc(N * 4), *pos = malloc(N * 4), *tgt = malloc(N * 4);
    float *logp = malloc(N * 4), *dlogp = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)(i * 7919 % V), mask[i] = 1, pos[i] = i % T;
        tgt[i] = i % T + 1 < T ? (int32_t)((i + 1) * 7919 % V) : -1, dlogp[i] = 1.0f / N;
    }
    grpo_batch b = {sizeof b, B, T, ids, mask, pos, tgt, 1.0f};
    double best = 1e30;
    for (int s = 0; s <= steps; s++) { /* step 0 warms up */
        double t0 = now();
        grpo_model_zero_grad(m);
        if (grpo_model_forward(m, &b, logp, NULL, 1.0f, &err) ||
            grpo_model_backward(m, &b, dlogp, 1.0f, &err)) {
            fprintf(stderr, "bench_moe: %s\n", err.message);
            return 1;
        }
        double dt = now() - t0;
        if (s > 0 && dt < best) best = dt;
    }
    int32_t nl, ne;
    const float *load = desc->expert_load(m->inst, &nl, &ne);
    printf("aux %.4f, layer 0 load:", desc->aux_loss(m->inst));
    for (int i = 0; i < ne; i++) printf(" %.0f", load[i]);
    double flops = 3 * fwd_flops_per_token(T) * N;
    printf("\nfwd+bwd (%d,%d): %.3f s/step, %.0f tokens/s, %.1f GFLOP/s (best of %d)\n", B, T,
           best, N / best, flops / best / 1e9, steps);

    int32_t *prompt = malloc((size_t)R * P * 4), *pmask = malloc((size_t)R * P * 4);
    int32_t *out = malloc((size_t)R * NEW * 4), *n_out = malloc(R * 4);
    for (int i = 0; i < R * P; i++) prompt[i] = (int32_t)(i * 104729 % V), pmask[i] = 1;
    uint64_t rng[4] = {1, 2, 3, 4};
    double t0 = now();
    if (grpo_model_generate(m, prompt, pmask, R, P, NEW, -1, 0.0f, rng, out, n_out, &err)) {
        fprintf(stderr, "bench_moe: %s\n", err.message);
        return 1;
    }
    double dt = now() - t0;
    printf("decode %d rows, prompt %d, %d new: %.2f s, %.0f new tokens/s\n", R, P, NEW, dt,
           (double)R * NEW / dt);

    grpo_model_close(m);
    grpo_model_env_close(&env);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
    free(ids), free(mask), free(pos), free(tgt), free(logp), free(dlogp);
    free(prompt), free(pmask), free(out), free(n_out);
    return 0;
}
