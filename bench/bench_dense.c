/*
 * bench_dense.c — speed of the dense plugin on the CPU backend at the MiniMind2-small shape
 * (hidden 512, 8 layers, 8 query / 2 kv heads, intermediate 1408, vocab 6400, tied head).
 *
 *   build/bench/bench_dense [--threads N] [--batch B] [--seq T] [--rows R] [--prompt P]
 *                           [--new N] [--steps S]
 * Packs are looked for in <dir of the executable>/../packs (the build tree) and the usual path.
 *
 * Writes a random model (Llama naming, tied) to a temp HF directory, loads it through the
 * registry like any model, then measures:
 *   sgemm      cblas_sgemm (N,512)x(512,1408): the machine's reachable FLOP/s at these shapes
 *   fwd+bwd    forward + backward of (B,T) tokens (log-probs of next tokens, d logp = 1/N):
 *              tokens/s and model FLOP/s (6 * matmul params per token + attention, see flops())
 *   decode     grpo_model_generate of R rows: P-token prompts + N new tokens each (no EOS):
 *              new tokens/s over the whole call (prefill included)
 * Same numbers from PyTorch: bench/bench_dense_torch.py. Results: BENCHMARKS.md. The harness
 * (arguments, model directory, fwd+bwd and decode loops) is bench_util.h, shared with bench_moe.
 */
#include <sys/stat.h>

#include "bench_util.h"
#include <cblas.h>
#undef I

enum { C = 512, L = 8, NH = 8, NKV = 2, HD = 64, IM = 1408, V = 6400 };

/* A random model of the MiniMind2-small shape as config.json + model.safetensors in dir. */
static int write_model(const char *dir, grpo_error *err) {
    char config[1024];
    snprintf(config, sizeof config,
             "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
             "\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,"
             "\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
             "\"hidden_act\":\"silu\",\"max_position_embeddings\":32768}\n",
             C, L, NH, NKV, IM, V);
    int rc = bench_write_config(dir, config, err);
    if (rc != GRPO_OK) return rc;
    const char *names[] = {"input_layernorm.weight", "self_attn.q_proj.weight",
                           "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                           "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                           "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
    const int64_t shapes[9][2] = {{C, 0}, {NH * HD, C}, {NKV * HD, C}, {NKV * HD, C},
                                  {C, NH * HD}, {C, 0}, {IM, C}, {IM, C}, {C, IM}};
    const float sc = 1.0f / 22.6f; /* ~1/sqrt(512) */
    int n = 2 + 9 * L, k = 0;
    grpo_st_out *t = calloc(n, sizeof *t);
    char(*nm)[96] = calloc(n, sizeof *nm);
    snprintf(nm[k], 96, "model.embed_tokens.weight"), bench_tensor(&t[k], nm[k], V, C, sc), k++;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 9; j++, k++) {
            snprintf(nm[k], 96, "model.layers.%d.%s", l, names[j]);
            bench_tensor(&t[k], nm[k], shapes[j][0], shapes[j][1], sc);
        }
    snprintf(nm[k], 96, "model.norm.weight"), bench_tensor(&t[k], nm[k], C, 0, sc), k++;
    rc = bench_write_weights(dir, t, n, err);
    free(t), free(nm);
    return rc;
}

/* Model FLOPs per token of the forward: 2 per matmul weight, plus causal attention
 * (q.k and p.v over T/2 keys on average: 2 * 2 * (T/2) * NH*HD per layer). */
static double fwd_flops_per_token(int T) {
    double mm = (double)L * (C * NH * HD * 2 + C * NKV * HD * 2 + 3.0 * C * IM) + (double)C * V;
    return 2 * mm + (double)L * 2 * T * NH * HD;
}

static double bench_sgemm(int N) {
    float *a = malloc((size_t)N * C * 4), *b = malloc((size_t)IM * C * 4);
    float *c = malloc((size_t)N * IM * 4);
    for (size_t i = 0; i < (size_t)N * C; i++) a[i] = bench_uniform();
    for (size_t i = 0; i < (size_t)IM * C; i++) b[i] = bench_uniform();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IM, C, 1, a, C, b, C, 0, c, IM);
    int reps = 20;
    double t0 = bench_now();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IM, C, 1, a, C, b, C, 0, c, IM);
    double dt = bench_now() - t0;
    free(a), free(b), free(c);
    return 2.0 * N * C * IM * reps / dt;
}

int main(int argc, char **argv) {
    bench_args a = bench_parse_args(argc, argv);
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_bench_dense_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, &err) != GRPO_OK) bench_fail("bench_dense", &err);
    grpo_model_env env;
    grpo_model *m = bench_open("bench_dense", &env, dir, &a);
    printf("shape: hidden %d, layers %d, heads %d/%d, intermediate %d, vocab %d; threads %d\n", C,
           L, NH, NKV, IM, V, a.threads);
    int N = a.B * a.T;
    printf("sgemm (%d,%d)x(%d,%d): %.1f GFLOP/s\n", N, C, C, IM, bench_sgemm(N) / 1e9);
    double best = bench_fwd_bwd("bench_dense", m, &a, V, 0.0f);
    bench_print_fwd_bwd(&a, best, 3 * fwd_flops_per_token(a.T) * N);
    bench_decode("bench_dense", m, &a, V);
    grpo_model_close(m);
    grpo_model_env_close(&env);
    bench_remove_dir(dir);
    return 0;
}
