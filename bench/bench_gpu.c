/*
 * bench_gpu.c — the CUDA backend on a random model of a real shape: decode tokens/s at R rows
 * and forward+backward tokens/s with its model-FLOP utilisation (MFU). The PyTorch side is
 * bench/bench_gpu_torch.py (Hugging Face generate, and an autocast bf16 fwd+bwd); both run in
 * scripts/gpu-check.sh. Results: BENCHMARKS.md.
 *
 *   build/bench/bench_gpu [--shape qwen2.5-0.5b|minimind2-small] [--backend cuda|cpu]
 *                         [--dtype bf16|f32] [--batch B] [--seq T] [--rows R] [--prompt P]
 *                         [--new N] [--steps S] [--peak-tflops F]
 * MFU = model FLOPs per second / F (default 989: an H100/H200 SXM's dense bf16 tensor-core
 * peak); model FLOPs per token = 6 x (matmul parameters, head included) + the causal
 * attention's 6 x 2 x T x NH x HD per layer (q.k and p.v over T/2 keys on average, x3 for
 * forward + backward), as PaLM's appendix counts them.
 * GRPO_CUDA_EMULATION=1 runs the cuda backend under the host emulation: numbers then say
 * nothing about a GPU (the emulation is for correctness), use a tiny shape.
 */
#include "bench_util.h"

#include "kernels.h"
#include <math.h>

typedef struct shape {
    const char *name, *arch, *model_type;
    int C, L, NH, NKV, HD, I, V, tied, qkv_bias;
} shape;

static const shape SHAPES[] = {
    /* Qwen2.5-0.5B: 494 M parameters, tied head, biases on q/k/v */
    {"qwen2.5-0.5b", "Qwen2ForCausalLM", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 1, 1},
    /* MiniMind2-small (the project's CPU bench shape) */
    {"minimind2-small", "LlamaForCausalLM", "llama", 512, 8, 8, 2, 64, 1408, 6400, 1, 0},
};

/* A random model of shape s as config.json + model.safetensors in dir. */
static void write_model(const char *dir, const shape *s) {
    grpo_error err;
    grpo_error_init(&err);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"%s\"],\"model_type\":\"%s\",\"hidden_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"intermediate_size\":%d,\"vocab_size\":%d,\"rms_norm_eps\":1e-6,"
             "\"rope_theta\":1000000.0,\"tie_word_embeddings\":%s,\"hidden_act\":\"silu\","
             "\"max_position_embeddings\":32768}\n",
             s->arch, s->model_type, s->C, s->L, s->NH, s->NKV, s->I, s->V,
             s->tied ? "true" : "false");
    if (bench_write_config(dir, cfg, &err) != GRPO_OK) bench_fail("bench_gpu", &err);
    static const char *mats[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                  "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                  "mlp.down_proj"};
    int per_layer = 2 + 7 + (s->qkv_bias ? 3 : 0), n = 2 + per_layer * s->L, k = 0;
    grpo_st_out *t = calloc(n, sizeof *t);
    char(*nm)[96] = calloc(n, sizeof *nm);
    float sc = 1.0f / sqrtf((float)s->C);
    snprintf(nm[k], 96, "model.embed_tokens.weight"), bench_tensor(&t[k], nm[k], s->V, s->C, sc), k++;
    snprintf(nm[k], 96, "model.norm.weight"), bench_tensor(&t[k], nm[k], s->C, 0, 0), k++;
    for (int l = 0; l < s->L; l++) {
        int64_t out[7] = {s->NH * s->HD, s->NKV * s->HD, s->NKV * s->HD, s->C, s->I, s->I, s->C};
        int64_t in[7] = {s->C, s->C, s->C, s->NH * s->HD, s->C, s->C, s->I};
        for (int j = 0; j < 7; j++, k++) {
            snprintf(nm[k], 96, "model.layers.%d.%s.weight", l, mats[j]);
            bench_tensor(&t[k], nm[k], out[j], in[j], sc);
        }
        for (int j = 0; s->qkv_bias && j < 3; j++, k++) {
            snprintf(nm[k], 96, "model.layers.%d.%s.bias", l, mats[j]);
            bench_tensor(&t[k], nm[k], out[j], 0, 0);
        }
        snprintf(nm[k], 96, "model.layers.%d.input_layernorm.weight", l);
        bench_tensor(&t[k], nm[k], s->C, 0, 0), k++;
        snprintf(nm[k], 96, "model.layers.%d.post_attention_layernorm.weight", l);
        bench_tensor(&t[k], nm[k], s->C, 0, 0), k++;
    }
    if (bench_write_weights(dir, t, n, &err) != GRPO_OK) bench_fail("bench_gpu", &err);
    free(t), free(nm);
}

/* Model FLOPs of forward + backward per token at sequence length T (see the header). */
static double flops_per_token(const shape *s, int T) {
    double mm = (double)s->L * ((double)s->C * s->NH * s->HD * 2 + (double)s->C * s->NKV * s->HD * 2 +
                                3.0 * s->C * s->I) + (double)s->C * s->V;
    return 6 * mm + 6.0 * s->L * T * s->NH * s->HD;
}

int main(int argc, char **argv) {
    const char *shape_name = "qwen2.5-0.5b", *backend = "cuda", *dtype = "bf16";
    double peak_tflops = 989;
    char **rest = calloc(argc + 1, sizeof *rest);
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--shape")) shape_name = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--backend")) backend = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--dtype")) dtype = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--peak-tflops")) peak_tflops = atof(argv[++i]);
        else rest[nrest++] = argv[i];
    }
    bench_args a = bench_parse_args(nrest, rest);
    free(rest);
    const shape *s = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++)
        if (!strcmp(SHAPES[i].name, shape_name)) s = &SHAPES[i];
    int precision = !strcmp(dtype, "bf16") ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32;
    if (!s || (strcmp(dtype, "bf16") && strcmp(dtype, "f32"))) {
        fprintf(stderr, "bench_gpu: --shape qwen2.5-0.5b|minimind2-small, --dtype bf16|f32\n");
        return 2;
    }
    char dir[] = "/tmp/grpo_bench_gpu_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    write_model(dir, s);
    grpo_process proc;
    bench_env_open_on("bench_gpu", &proc, backend, a.threads, precision);
    grpo_error err;
    grpo_error_init(&err);
    grpo_model *m = NULL;
    if (grpo_model_open_dir(&m, &proc.reg, &proc.host, dir, 1, &err) != GRPO_OK ||
        grpo_model_reserve_acts(m, a.B, a.T, &err) != GRPO_OK)
        bench_fail("bench_gpu", &err);
    printf("shape %s: hidden %d, layers %d, heads %d/%d, intermediate %d, vocab %d; backend %s, "
           "dtype %s%s\n", s->name, s->C, s->L, s->NH, s->NKV, s->I, s->V, backend, dtype,
           getenv("GRPO_CUDA_EMULATION") ? " (GRPO_CUDA_EMULATION set: host emulation, no GPU)"
                                         : "");
    double best = bench_fwd_bwd("bench_gpu", m, &a, s->V, 0.0f);
    double fl = flops_per_token(s, a.T) * a.B * a.T;
    printf("fwd+bwd (%d,%d): %.4f s/step, %.0f tokens/s, %.1f TFLOP/s, MFU %.1f%% of %.0f "
           "TFLOP/s (best of %d)\n", a.B, a.T, best, a.B * a.T / best, fl / best / 1e12,
           100 * fl / best / 1e12 / peak_tflops, peak_tflops, a.steps);
    grpo_model_close(m);
    /* decode from a frozen copy whose matrices are held in the compute dtype: with bf16, what
     * the trainer's rollout copy (sampling.weights_dtype = bf16) reads, half the bytes */
    int32_t wtype = precision == GRPO_DTYPE_BF16 ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32;
    if (grpo_model_open_dir_as(&m, &proc.reg, &proc.host, dir, 0, wtype, &err) != GRPO_OK)
        bench_fail("bench_gpu", &err);
    bench_generate("bench_gpu", m, a.R, a.P, 2, s->V); /* warm-up */
    bench_decode("bench_gpu", m, &a, s->V);
    grpo_model_close(m);
    grpo_process_close(&proc);
    bench_remove_dir(dir);
    return 0;
}
