/*
 * bench_bf16.c — weights held in bf16 (ABI 1.5) against fp32 on the MiniMind2-small shape
 * (hidden 512, 8 layers, 8/2 heads, intermediate 1408, vocab 6400, tied head), frozen models:
 *   - parameter memory of the model held in fp32 and in bf16;
 *   - decode: the sampler (greedy, G = 1) on R rows of P-token prompts, NEW new tokens each,
 *     the same model in fp32 and in bf16 (what sampling.weights_dtype = bf16 samples with);
 *   - matmul of R rows at the MLP's shapes with weights from memory (cycling 128 MB of copies),
 *     fp32 matmul_forward vs bf16 matmul_forward_w: GB/s of weights read;
 *   - forward + backward of (B,T) through a frozen base with LoRA-like use: the fp32 and the bf16
 *     base's forward (the reference / LoRA pass cost).
 * Every time is CPU time of the process (all threads), best of three, so that a busy shared
 * machine does not count; the ratio bf16 / fp32 is the figure.
 *
 *   build/bench/bench_bf16 [--threads N] [--rows R] [--prompt P] [--new N] [--batch B] [--seq T]
 */
#include "bench_util.h"

#include <time.h>

#include "io/safetensors.h"

enum { C = 512, L = 8, NH = 8, NKV = 2, HD = 64, IM = 1408, V = 6400 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_model(const char *dir, grpo_error *err) {
    char config[1024];
    snprintf(config, sizeof config,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
             "\"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"num_key_value_heads\": %d, \"intermediate_size\": %d, \"vocab_size\": %d, "
             "\"rms_norm_eps\": 1e-5, \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, "
             "\"max_position_embeddings\": 32768, \"hidden_act\": \"silu\"}",
             C, L, NH, NKV, IM, V);
    if (bench_write_config(dir, config, err) != GRPO_OK) return GRPO_ERR_IO;
    static char nm[3 + 9 * L][96];
    grpo_st_out t[3 + 9 * L];
    int k = 0;
    const float sc = 0.05f;
    snprintf(nm[k], 96, "model.embed_tokens.weight"), bench_tensor(&t[k], nm[k], V, C, sc), k++;
    const char *names[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                            "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int64_t shapes[7][2] = {{NH * HD, C}, {NKV * HD, C}, {NKV * HD, C}, {C, NH * HD},
                                  {IM, C},      {IM, C},       {C, IM}};
    for (int l = 0; l < L; l++) {
        snprintf(nm[k], 96, "model.layers.%d.input_layernorm.weight", l);
        bench_tensor(&t[k], nm[k], C, 0, 1), k++;
        snprintf(nm[k], 96, "model.layers.%d.post_attention_layernorm.weight", l);
        bench_tensor(&t[k], nm[k], C, 0, 1), k++;
        for (int j = 0; j < 7; j++) {
            snprintf(nm[k], 96, "model.layers.%d.%s.weight", l, names[j]);
            bench_tensor(&t[k], nm[k], shapes[j][0], shapes[j][1], sc), k++;
        }
    }
    snprintf(nm[k], 96, "model.norm.weight"), bench_tensor(&t[k], nm[k], C, 0, 1), k++;
    return bench_write_weights(dir, t, k, err);
}

/* Best CPU seconds of three runs of the decode workload on m. */
static double decode_seconds(grpo_model *m, const bench_args *a) {
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double c0 = cpu_now();
        bench_generate("bench_bf16", m, a->R, a->P, a->NEW, V);
        double dc = cpu_now() - c0;
        best = dc < best ? dc : best;
    }
    return best;
}

/* Best CPU seconds of three frozen forwards of (B,T) on m. */
static double forward_seconds(grpo_model *m, const bench_args *a) {
    int N = a->B * a->T;
    grpo_error err;
    grpo_error_init(&err);
    int32_t *ids = malloc(N * 4), *mask = malloc(N * 4), *pos = malloc(N * 4), *tgt = malloc(N * 4);
    float *logp = malloc(N * 4);
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)(i * 7919 % V), mask[i] = 1, pos[i] = i % a->T,
        tgt[i] = (int32_t)((i + 1) * 7919 % V);
    grpo_batch b = {sizeof b, a->B, a->T, ids, mask, pos, tgt, 0.0f, 0};
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double c0 = cpu_now();
        if (grpo_model_forward(m, &b, logp, NULL, 1.0f, &err)) bench_fail("bench_bf16", &err);
        double dc = cpu_now() - c0;
        best = dc < best ? dc : best;
    }
    free(ids), free(mask), free(pos), free(tgt), free(logp);
    return best;
}

/* GB/s of weights read by R-row matmuls at (IC -> OC), weights cycling through 128 MB. */
static double matmul_gbs(const grpo_ops *o, int R, int IC, int OC, int32_t dtype) {
    const size_t pool = (size_t)128 << 20, esz = grpo_dtype_size(dtype);
    size_t nw = (size_t)IC * OC, copies = pool / (nw * esz);
    char *w = o->alloc(o->ctx, pool);
    float *x = o->alloc(o->ctx, (size_t)R * IC * 4), *y = o->alloc(o->ctx, (size_t)R * OC * 4);
    uint16_t *h = (uint16_t *)w;
    for (size_t i = 0; i < pool / 2; i++) h[i] = grpo_bf16_from_f32(0.01f * bench_uniform());
    if (dtype == GRPO_DTYPE_F32) /* fp32 values of the same magnitude */
        for (size_t i = 0; i < pool / 4; i++) ((float *)w)[i] = 0.01f * bench_uniform();
    for (int i = 0; i < R * IC; i++) x[i] = bench_uniform();
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        int calls = 0;
        double c0 = cpu_now(), dc;
        do {
            const void *wc = w + (calls % copies) * nw * esz;
            if (dtype == GRPO_DTYPE_F32) o->matmul_forward(o->ctx, y, x, wc, NULL, R, IC, OC);
            else o->matmul_forward_w(o->ctx, y, x, wc, dtype, NULL, R, IC, OC);
            calls++;
            dc = cpu_now() - c0;
        } while (dc < 0.2);
        best = dc / calls < best ? dc / calls : best;
    }
    o->free(o->ctx, w), o->free(o->ctx, x), o->free(o->ctx, y);
    return (double)nw * esz / best / 1e9;
}

int main(int argc, char **argv) {
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (blas_core.c) */
    bench_args a = bench_parse_args(argc, argv);
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_bench_bf16_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, &err) != GRPO_OK) bench_fail("bench_bf16", &err);
    grpo_process proc;
    grpo_model *m32 = NULL, *m16 = NULL;
    bench_env_open("bench_bf16", &proc, a.threads);
    if (grpo_model_open_dir(&m32, &proc.reg, &proc.host, dir, 0, &err) ||
        grpo_model_open_dir_as(&m16, &proc.reg, &proc.host, dir, 0, GRPO_DTYPE_BF16, &err) ||
        grpo_model_reserve_acts(m32, a.B, a.T, &err) ||
        grpo_model_reserve_acts(m16, a.B, a.T, &err))
        bench_fail("bench_bf16", &err);
    printf("shape: hidden %d, layers %d, heads %d/%d, intermediate %d, vocab %d; threads %d\n", C,
           L, NH, NKV, IM, V, a.threads);
    printf("parameters: fp32 %.1f MiB, bf16 %.1f MiB (%.2fx)\n",
           m32->section * 4.0 / (1 << 20), m16->section * 4.0 / (1 << 20),
           (double)m16->section / m32->section);
    double d32 = decode_seconds(m32, &a), d16 = decode_seconds(m16, &a);
    double tok = (double)a.R * a.NEW;
    printf("decode %d rows, prompt %d, %d new (cpu time): fp32 %.0f tok/s, bf16 %.0f tok/s "
           "(%.2fx)\n", a.R, a.P, a.NEW, tok / d32, tok / d16, d32 / d16);
    double f32 = forward_seconds(m32, &a), f16 = forward_seconds(m16, &a);
    printf("frozen forward (%d,%d) (cpu time): fp32 %.3f s, bf16 %.3f s (%.2fx)\n", a.B, a.T, f32,
           f16, f32 / f16);
    const int shapes[2][2] = {{C, IM}, {IM, C}};
    const char *nm[2] = {"gate, up", "down"};
    for (int s = 0; s < 2; s++) {
        double g32 = matmul_gbs(proc.ops, a.R, shapes[s][0], shapes[s][1], GRPO_DTYPE_F32);
        double g16 = matmul_gbs(proc.ops, a.R, shapes[s][0], shapes[s][1], GRPO_DTYPE_BF16);
        printf("matmul %d rows, %-8s (%4d -> %4d): fp32 %.1f GB/s, bf16 %.1f GB/s of weights; "
               "bf16 time %.2fx of fp32\n", a.R, nm[s], shapes[s][0], shapes[s][1], g32, g16,
               (g32 / 4) / (g16 / 2));
    }
    grpo_model_close(m32), grpo_model_close(m16);
    grpo_process_close(&proc);
    bench_remove_dir(dir);
    return 0;
}
