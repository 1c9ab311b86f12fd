/*
 * frozen_forward.h — a test shared by the model suites (test_dense.c, test_moe.c): a frozen model
 * (the reference) runs forward in row chunks with an activation block of a few rows
 * (core/host/model_instance.h), in the forward-only layout (lm_decoder.c frozen: a smaller block
 * per row than training); its log-probs and entropies must be those of the training forward of the
 * whole batch, bit for bit. The batch is 96 rows: the fixture's B0 rows of (ids, mask, pos,
 * targets), tiled and shifted through the vocabulary; the frozen model is forced to the fewest
 * rows a chunk may have (GRPO_FWD_MIN_TOKENS tokens) by a 1-byte budget. chunks = 0 (a mixture
 * of experts): the frozen model must not chunk at all, and still match.
 * Bit for bit where the kernels are batch-invariant: the cpu backend and the emulated cuda one
 * (whose GEMMs are the host's). A real GPU's cuBLAS picks its kernels by shape, so fewer rows
 * per call may round differently (README, "Sampler against trainer"): there the two must agree
 * within 1e-5 instead (the H200 run of 2026-12-04 showed this test failing bitwise).
 */
#ifndef GRPO_TEST_FROZEN_FORWARD_H
#define GRPO_TEST_FROZEN_FORWARD_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host/model_instance.h"
#include "host/work_memory.h"
#include "test_model_io.h"

/* Whether the test backend's frozen chunks must give the training forward's bits (see above). */
static int frozen_forward_bitwise(void) {
    const char *emu = getenv("GRPO_CUDA_EMULATION");
    return strcmp(test_backend_name(), "cuda") != 0 || (emu && strcmp(emu, "1") == 0);
}

/* The frozen forward's log-probs lf and entropies ef (n) against the training forward's lt, et:
 * the same bits, or within 1e-5 on a GPU (above). */
static void check_same_forward(const float *lt, const float *et, const float *lf, const float *ef,
                               size_t n, const char *who, const char *what) {
    if (frozen_forward_bitwise()) {
        ck_assert_msg(!memcmp(lt, lf, n * 4), "%s: %s frozen log-probs differ", who, what);
        ck_assert_msg(!memcmp(et, ef, n * 4), "%s: %s frozen entropies differ", who, what);
        return;
    }
    double dl = 0, de = 0;
    for (size_t i = 0; i < n; i++)
        dl = fmax(dl, fabs(lt[i] - lf[i])), de = fmax(de, fabs(et[i] - ef[i]));
    ck_assert_msg(dl < 1e-5 && de < 1e-5, "%s: %s frozen log-probs differ by %g, entropies by "
                  "%g (at most 1e-5 on a GPU)", who, what, dl, de);
}

static void check_frozen_forward_in_chunks(grpo_model *train, grpo_model *frozen, const char *who,
                                           const int32_t *ids0, const int32_t *mask0,
                                           const int32_t *pos0, const int32_t *tg0, int32_t B0,
                                           int32_t T, int32_t V, int chunks) {
    grpo_error err;
    grpo_error_init(&err);
    int32_t B = 96;
    size_t n = (size_t)B * T;
    int32_t *ids = malloc(n * 4), *mask = malloc(n * 4), *pos = malloc(n * 4), *tg = malloc(n * 4);
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t, j = (size_t)(b % B0) * T + t;
            int32_t shift = b / B0 * 7;
            ids[i] = (ids0[j] + shift) % V, mask[i] = mask0[j], pos[i] = pos0[j];
            tg[i] = tg0[j] >= 0 ? (tg0[j] + shift) % V : -1;
        }
    /* each model's own copy: the two may be on two opened backends (streams) */
    test_batch bt = test_batch_make(train->ops, B, T, ids, mask, pos, tg, 0.0f);
    test_batch bf = test_batch_make(frozen->ops, B, T, ids, mask, pos, tg, 0.0f);
    /* the frozen block is the forward-only layout: smaller than the training one per row */
    ck_assert_uint_lt(frozen->desc->activation_floats(frozen->inst, 1, T),
                      train->desc->activation_floats(train->inst, 1, T));
    frozen->fwd_budget = 1;
    ck_assert_msg(grpo_model_reserve_acts(train, B, T, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_model_reserve_acts(frozen, B, T, &err) == GRPO_OK, "%s", err.message);
    int32_t rows = chunks ? (GRPO_FWD_MIN_TOKENS + T - 1) / T : B;
    ck_assert_int_eq(frozen->acts_B, rows);
    if (chunks) ck_assert_int_lt(rows, B); /* the forward below runs in several chunks */
    float *lt = calloc(n, 4), *et = calloc(n, 4), *lf = calloc(n, 4), *ef = calloc(n, 4);
    ck_assert_msg(test_forward(train, &bt.b, lt, et, 0.8f, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(test_forward(frozen, &bf.b, lf, ef, 0.8f, &err) == GRPO_OK, "%s", err.message);
    size_t real = 0;
    for (size_t i = 0; i < n; i++) real += tg[i] >= 0 && lt[i] != 0.0f;
    ck_assert_msg(real > n / 4, "%s: only %zu log-probs computed", who, real);
    check_same_forward(lt, et, lf, ef, n, who, "chunked");
    /* longer rows later: the block holds fewer of them instead of keeping the old row count */
    ck_assert_msg(grpo_model_reserve_acts(frozen, B, 4 * T, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq(frozen->acts_B, chunks ? (GRPO_FWD_MIN_TOKENS + 4 * T - 1) / (4 * T) : B);
    /* a work block larger than the budget (in a training step the policy's, which the
     * reference shares) is used whole: one chunk, no new memory, the same bits */
    frozen->fwd_budget = UINT64_MAX;
    ck_assert_msg(grpo_model_reserve_acts(frozen, B, T, &err) == GRPO_OK, "%s", err.message);
    uint64_t block = frozen->work->bytes;
    frozen->fwd_budget = 1;
    ck_assert_msg(grpo_model_reserve_acts(frozen, B, T, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq(frozen->acts_B, B);
    ck_assert_uint_eq(frozen->work->bytes, block);
    memset(lf, 0, n * 4), memset(ef, 0, n * 4);
    ck_assert_msg(test_forward(frozen, &bf.b, lf, ef, 0.8f, &err) == GRPO_OK, "%s", err.message);
    check_same_forward(lt, et, lf, ef, n, who, "one-chunk");
    test_batch_free(&bt), test_batch_free(&bf);
    free(ids), free(mask), free(pos), free(tg), free(lt), free(et), free(lf), free(ef);
}

#endif
