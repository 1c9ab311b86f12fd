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
 *   decode   the sampler (greedy) on R rows: P-token prompts + N new tokens each (no EOS)
 * The same from PyTorch: bench/bench_moe_torch.py. Results: BENCHMARKS.md. The harness is
 * bench_util.h, shared with bench_dense.
 */
#include <sys/stat.h>

#include "bench_util.h"

enum { C = 640, L = 8, NH = 8, NKV = 2, HD = 80, IM = 1728, E = 4, K = 2, NS = 1, V = 6400 };

static int write_config(const char *dir, grpo_error *err) {
    char config[1024];
    snprintf(config, sizeof config,
             "{\"architectures\":[\"MiniMindForCausalLM\"],\"model_type\":\"minimind\","
             "\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,"
             "\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\","
             "\"use_moe\":true,\"n_routed_experts\":%d,\"num_experts_per_tok\":%d,"
             "\"n_shared_experts\":%d,\"scoring_func\":\"softmax\",\"aux_loss_alpha\":0.1,"
             "\"seq_aux\":true,\"norm_topk_prob\":true}\n",
             C, L, NH, NKV, IM, V, E, K, NS);
    return bench_write_config(dir, config, err);
}

/* A random MiniMind2-MoE model as config.json + model.safetensors in dir; matrices
 * uniform * 1.7 / sqrt(640), norms 1. */
static int write_model(const char *dir, grpo_error *err) {
    int rc = write_config(dir, err);
    if (rc != GRPO_OK) return rc;
    const float sc = 1.7f / 25.3f;
    int per_layer = 7 + 3 * (E + NS), n = 2 + L * per_layer, k = 0;
    grpo_st_out *t = calloc(n, sizeof *t);
    char(*nm)[96] = calloc(n, sizeof *nm);
    snprintf(nm[k], 96, "model.embed_tokens.weight"), bench_tensor(&t[k], nm[k], V, C, sc), k++;
    for (int l = 0; l < L; l++) {
        const char *names[7] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                "self_attn.v_proj", "self_attn.o_proj",
                                "post_attention_layernorm", "mlp.gate"};
        const int64_t shapes[7][2] = {{C, 0}, {NH * HD, C}, {NKV * HD, C}, {NKV * HD, C},
                                      {C, NH * HD}, {C, 0}, {E, C}};
        for (int j = 0; j < 7; j++, k++) {
            snprintf(nm[k], 96, "model.layers.%d.%s.weight", l, names[j]);
            bench_tensor(&t[k], nm[k], shapes[j][0], shapes[j][1], sc);
        }
        for (int e = 0; e < E + NS; e++) {
            const char *kind = e < E ? "experts" : "shared_experts";
            int idx = e < E ? e : e - E;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.gate_proj.weight", l, kind, idx);
            bench_tensor(&t[k], nm[k], IM, C, sc), k++;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.up_proj.weight", l, kind, idx);
            bench_tensor(&t[k], nm[k], IM, C, sc), k++;
            snprintf(nm[k], 96, "model.layers.%d.mlp.%s.%d.down_proj.weight", l, kind, idx);
            bench_tensor(&t[k], nm[k], C, IM, sc), k++;
        }
    }
    snprintf(nm[k], 96, "model.norm.weight"), bench_tensor(&t[k], nm[k], C, 0, sc), k++;
    rc = bench_write_weights(dir, t, n, err);
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
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (blas_core.c) */
    bench_args a = bench_parse_args(argc, argv);
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_bench_moe_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, &err) != GRPO_OK) bench_fail("bench_moe", &err);
    grpo_process proc;
    grpo_model *m = bench_open("bench_moe", &proc, dir, &a);
    const grpo_model_desc *desc = m->desc; /* moe.causal_lm: dense refuses use_moe */
    printf("shape: hidden %d, layers %d, heads %d/%d, expert intermediate %d, %d routed top-%d + "
           "%d shared, vocab %d; threads %d\n", C, L, NH, NKV, IM, E, K, NS, V, a.threads);
    double best = bench_fwd_bwd("bench_moe", m, &a, V, 1.0f);
    int32_t nl, ne;
    const float *load = desc->expert_load(m->inst, &nl, &ne);
    printf("aux %.4f, layer 0 load:", desc->aux_loss(m->inst));
    for (int i = 0; i < ne; i++) printf(" %.0f", load[i]);
    printf("\n");
    bench_print_fwd_bwd(&a, best, 3 * fwd_flops_per_token(a.T) * a.B * a.T);
    bench_decode("bench_moe", m, &a, V);
    grpo_model_close(m);
    grpo_process_close(&proc);
    bench_remove_dir(dir);
    return 0;
}
