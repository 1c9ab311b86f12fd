/*
 * test_checkpoint_stream.c — checkpoints and saved models are written tensor by tensor from the
 * backend's memory (io/safetensors.h: a tensor given by a reader; host/backend_out.h), not from a
 * host copy of every tensor (issue 30: that copy added ~4 GB to the peak memory of a full
 * fine-tuning run of Qwen2.5-0.5B while a checkpoint was written).
 *
 *   1. The bytes are the former writer's: model.safetensors and optimizer.safetensors of a full
 *      fine-tuning checkpoint (grpo_checkpoint_save), adapter_model.safetensors and
 *      optimizer.safetensors of a LoRA checkpoint, and model.safetensors of a frozen model held
 *      in bf16 (grpo_model_save: widened one tensor at a time) equal, byte for byte, the files
 *      grpo_st_write makes from host copies of every tensor (each read by grpo_model_read_param
 *      or downloaded, as the writer did before). The moments hold a different value in every
 *      element (uploaded), so a tensor read from a wrong offset would show.
 *   2. The memory: the peak RSS while grpo_checkpoint_save writes a model of ~100 MB (grpo
 *      init-model --hidden 768 --layers 4 --intermediate 2048: 25.6 M floats) and its two moment
 *      blocks, above the RSS just before (VmHWM reset through /proc/self/clear_refs), must stay
 *      under a quarter of the weights' bytes. The former writer held a host copy of the weights
 *      (1x) and then of both moment blocks (2x): 8x over that bound. Streamed, the cpu backend's
 *      tensors are written where they lie (nothing is copied) and the cuda backend's pass through
 *      one buffer of the largest tensor (768 x 2048 floats, 6.3 MB, a quarter of the bound).
 * The suite runs on GRPO_TEST_BACKEND (tests/test_backend.h): test_checkpoint_stream_cuda on a
 * GPU, _cuda_emu under the host emulation of kernels/cuda in its strict mode, where host code
 * that touched device memory directly would fault (tests/cuda_models.cmake).
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"
#include "host/host.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "kernels.h"
#include "test_backend.h"
#include "train/train_state.h"

static char root[256];

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/grpo_ckstream_%d_XXXXXX", (int)getpid());
    ck_assert_ptr_nonnull(mkdtemp(root));
}

/* Runs the shell command printf(fmt, ...), which must succeed. */
static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "command failed (%d): %s", rc, cmd);
}

static void teardown(void) { sh("rm -rf '%s'", root); }

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora;
    char dir[512];
} fixture;

/* A random-init llama (grpo init-model ARGS) in root/NAME, opened (trainable or frozen, weights
 * held as wdtype). */
static void fixture_open(fixture *f, const char *name, const char *args, int trainable,
                         int32_t wdtype) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s/%s", root, name);
    sh("'%s/grpo' init-model '%s' %s >/dev/null", GRPO_BINARY_DIR, f->dir, args);
    f->ops = test_backend_open(0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    ck_ok(grpo_model_open_dir_as(&f->m, &f->reg, &f->host, f->dir, trainable, wdtype, &err),
          &err);
}

static void fixture_close(fixture *f) {
    grpo_lora_free(&f->lora);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

/* n floats of a pattern that differs in every element (and between the two moments: k). */
static void upload_pattern(const grpo_ops *o, float *dst, uint64_t n, int k) {
    float *h = malloc(n * sizeof(float) + 1);
    for (uint64_t i = 0; i < n; i++)
        h[i] = k ? (float)(i % 9973) * 1e-7f + 1e-9f : sinf(0.37f * (float)i) * 1e-3f;
    o->upload(o->ctx, dst, h, n * sizeof(float));
    free(h);
}

/* ---- the former writer: host copies of every tensor, then grpo_st_write -------------------- */

/* A tensor of a host block: its name, offset (floats) and shape. */
typedef struct block_tensor {
    char name[640];
    uint64_t off;
    int ndim;
    int64_t shape[4];
} block_tensor;

/* path = the n tensors of the host block h, as the former writer wrote them. */
static void write_from_host(const char *path, const float *h, const block_tensor *t, size_t n) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_st_out *o = calloc(n + 1, sizeof *o);
    for (size_t i = 0; i < n; i++) {
        o[i] = (grpo_st_out){.name = t[i].name, .data = h + t[i].off, .ndim = t[i].ndim};
        memcpy(o[i].shape, t[i].shape, sizeof t[i].shape);
    }
    ck_ok(grpo_st_write(path, o, n, GRPO_ST_F32, &err), &err);
    free(o);
}

/* The model's non-tied tensors, each read as fp32 (grpo_model_read_param), at path. */
static void old_model_file(const grpo_model *m, const char *path) {
    grpo_error err;
    grpo_error_init(&err);
    block_tensor *t = calloc(m->n_params, sizeof *t);
    uint64_t total = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < m->n_params; i++) {
        if (m->params[i].flags & GRPO_PARAM_TIED) continue;
        snprintf(t[n].name, sizeof t[n].name, "%s", m->params[i].name);
        t[n].off = total, t[n].ndim = m->params[i].ndim, total += m->numel[i];
        memcpy(t[n].shape, m->params[i].shape, sizeof t[n].shape);
        n++;
    }
    float *h = malloc(total * sizeof(float) + 1);
    for (uint32_t i = 0, k = 0; i < m->n_params; i++)
        if (!(m->params[i].flags & GRPO_PARAM_TIED))
            ck_ok(grpo_model_read_param(m, i, h + t[k++].off, &err), &err);
    write_from_host(path, h, t, n);
    free(h), free(t);
}

/* exp_avg.NAME, exp_avg_sq.NAME of each tensor t (offsets into the P-float blocks m, v of
 * backend memory), downloaded whole, at path. */
static void old_moments_file(const grpo_ops *o, const float *m, const float *v, uint64_t P,
                             const block_tensor *t, size_t n, const char *path) {
    float *h = malloc(2 * P * sizeof(float) + 1);
    o->download(o->ctx, h, m, P * sizeof(float));
    o->download(o->ctx, h + P, v, P * sizeof(float));
    block_tensor *mt = calloc(2 * n + 1, sizeof *mt);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            block_tensor *x = &mt[2 * i + k];
            *x = t[i];
            snprintf(x->name, sizeof x->name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", t[i].name);
            x->off = t[i].off + (uint64_t)k * P;
        }
    write_from_host(path, h, mt, 2 * n);
    free(mt), free(h);
}

static void same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_read_file(a, &x, &nx, &err), &err);
    ck_ok(grpo_read_file(b, &y, &ny, &err), &err);
    ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "%s (%zu bytes) differs from the former "
                  "writer's %s (%zu bytes)", a, nx, b, ny);
    ck_assert_uint_gt(nx, 1000);
    free(x), free(y);
}

static grpo_train_state state_at(long step) {
    grpo_train_state st;
    memset(&st, 0, sizeof st);
    st.step = st.optimizer_step = step;
    grpo_run_id_new(st.run_id);
    return st;
}

/* ---- 1. the bytes --------------------------------------------------------------------------- */

/* The dense pack (a relayout slot: its tensors are read into the writer's buffer) and the MoE
 * pack (none: on the cpu backend its tensors are written where they lie). */
static const char *const small_models[2] = {"--hidden 64 --layers 2 --intermediate 96",
                                            "--hidden 64 --layers 2 --intermediate 48 --moe"};

START_TEST(a_full_checkpoint_has_the_former_writers_bytes) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "small", small_models[_i], 1, GRPO_DTYPE_F32);
    grpo_model *m = f.m;
    upload_pattern(f.ops, m->adam_m, m->section, 0);
    upload_pattern(f.ops, m->adam_v, m->section, 1);
    grpo_train_state st = state_at(3);
    ck_ok(grpo_checkpoint_save(root, 0, m, NULL, &st, NULL, &err), &err);
    char got[700], want[700];
    snprintf(want, sizeof want, "%s/old_model.safetensors", root);
    old_model_file(m, want);
    snprintf(got, sizeof got, "%s/checkpoint-00000003/model.safetensors", root);
    same_file(got, want);
    block_tensor *t = calloc(m->n_params, sizeof *t);
    size_t n = 0;
    for (uint32_t i = 0; i < m->n_params; i++) {
        if (m->params[i].flags & GRPO_PARAM_TIED) continue;
        snprintf(t[n].name, sizeof t[n].name, "%s", m->params[i].name);
        t[n].off = m->offset[i], t[n].ndim = m->params[i].ndim;
        memcpy(t[n].shape, m->params[i].shape, sizeof t[n].shape);
        n++;
    }
    snprintf(want, sizeof want, "%s/old_optimizer.safetensors", root);
    old_moments_file(f.ops, m->adam_m, m->adam_v, m->section, t, n, want);
    snprintf(got, sizeof got, "%s/checkpoint-00000003/optimizer.safetensors", root);
    same_file(got, want);
    free(t);
    fixture_close(&f);
}
END_TEST

START_TEST(a_lora_checkpoint_has_the_former_writers_bytes) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "small", "--hidden 64 --layers 2 --intermediate 96", 0, GRPO_DTYPE_F32);
    grpo_lora_opts o = {4, 8.0, 0, "all-linear", 0.0};
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 7, &err), &err);
    grpo_lora *l = &f.lora;
    upload_pattern(f.ops, l->block, l->floats, 1); /* A and B (0 from attach) of every adapter */
    upload_pattern(f.ops, l->block + 2 * l->floats, l->floats, 0);
    upload_pattern(f.ops, l->block + 3 * l->floats, l->floats, 1);
    grpo_train_state st = state_at(5);
    ck_ok(grpo_checkpoint_save(root, 0, f.m, l, &st, NULL, &err), &err);
    block_tensor *t = calloc(2 * (size_t)l->n, sizeof *t);
    for (uint32_t i = 0; i < l->n; i++) {
        const grpo_param_desc *d = &f.m->params[l->ad[i].param];
        block_tensor *a = &t[2 * i], *b = &t[2 * i + 1];
        *a = (block_tensor){.off = (uint64_t)(l->ad[i].A - l->block), .ndim = 2,
                            .shape = {l->r, d->shape[1]}, .name = {0}};
        *b = (block_tensor){.off = (uint64_t)(l->ad[i].B - l->block), .ndim = 2,
                            .shape = {d->shape[0], l->r}, .name = {0}};
        grpo_lora_names(l, i, a->name, b->name, sizeof a->name);
    }
    float *h = malloc(l->floats * sizeof(float) + 1);
    f.ops->download(f.ops->ctx, h, l->block, l->floats * sizeof(float));
    char got[700], want[700];
    snprintf(want, sizeof want, "%s/old_adapter.safetensors", root);
    write_from_host(want, h, t, 2 * (size_t)l->n);
    snprintf(got, sizeof got, "%s/checkpoint-00000005/adapter_model.safetensors", root);
    same_file(got, want);
    snprintf(want, sizeof want, "%s/old_optimizer.safetensors", root);
    old_moments_file(f.ops, l->block + 2 * l->floats, l->block + 3 * l->floats, l->floats, t,
                     2 * (size_t)l->n, want);
    snprintf(got, sizeof got, "%s/checkpoint-00000005/optimizer.safetensors", root);
    same_file(got, want);
    free(h), free(t);
    fixture_close(&f);
}
END_TEST

/* A frozen model held in bf16 (where the backend has the typed ops): its tensors are widened as
 * the writer reaches them, and the file is the former writer's. */
START_TEST(a_bf16_held_model_saves_the_former_writers_bytes) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "small", small_models[_i], 0, GRPO_DTYPE_BF16);
    int bf16 = 0;
    for (uint32_t i = 0; i < f.m->n_params; i++) bf16 |= f.m->dtype[i] == GRPO_DTYPE_BF16;
    ck_assert_msg(bf16, "no tensor is held in bf16: the case would prove nothing");
    char out[600], got[700], want[700];
    snprintf(out, sizeof out, "%s/saved", root);
    ck_ok(grpo_model_save(f.m, out, &err), &err);
    snprintf(want, sizeof want, "%s/old_model.safetensors", root);
    old_model_file(f.m, want);
    snprintf(got, sizeof got, "%s/model.safetensors", out);
    same_file(got, want);
    fixture_close(&f);
}
END_TEST

/* ---- 2. the memory -------------------------------------------------------------------------- */

/* A line "KEY: N kB" of /proc/self/status, in bytes. */
static double status_bytes(const char *key) {
    FILE *fp = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(fp);
    char line[256];
    double v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, key, k) && line[k] == ':') v = atof(line + k + 1) * 1024.0;
    fclose(fp);
    ck_assert_msg(v >= 0, "no %s in /proc/self/status", key);
    return v;
}

START_TEST(a_checkpoint_holds_no_copy_of_the_model) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "big", "--hidden 768 --layers 4 --heads 12 --kv-heads 4 --intermediate 2048",
                 1, GRPO_DTYPE_F32);
    grpo_model *m = f.m;
    upload_pattern(f.ops, m->adam_m, m->section, 0);
    upload_pattern(f.ops, m->adam_v, m->section, 1);
    double weights = (double)m->section * sizeof(float);
    ck_assert_msg(weights > 90e6, "the model holds %.0f bytes: expected ~100 MB", weights);
    FILE *fp = fopen("/proc/self/clear_refs", "w");
    if (!fp || fputs("5", fp) < 0 || fclose(fp) != 0) { /* resets VmHWM to VmRSS */
        printf("SKIP: /proc/self/clear_refs cannot reset the peak RSS here\n");
        fixture_close(&f);
        return;
    }
    double rss0 = status_bytes("VmRSS");
    grpo_train_state st = state_at(1);
    ck_ok(grpo_checkpoint_save(root, 0, m, NULL, &st, NULL, &err), &err);
    double grew = status_bytes("VmHWM") - rss0;
    printf("checkpoint of %.1f MB of weights (and 2x that of moments) on %s: peak RSS +%.1f MB\n",
           weights / 1e6, f.ops->name, grew / 1e6);
    ck_assert_msg(grew < weights / 4, "writing the checkpoint raised the peak RSS by %.1f MB, "
                  "over a quarter of the weights' %.1f MB", grew / 1e6, weights / 1e6);
    fixture_close(&f);
}
END_TEST

int main(void) {
    test_backend_require();
    Suite *s = suite_create("checkpoint_stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, a_full_checkpoint_has_the_former_writers_bytes, 0, 2);
    tcase_add_test(tc, a_lora_checkpoint_has_the_former_writers_bytes);
    tcase_add_loop_test(tc, a_bf16_held_model_saves_the_former_writers_bytes, 0, 2);
    tcase_add_test(tc, a_checkpoint_holds_no_copy_of_the_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
