/*
 * test_packed_training.c — packed training (train.max_tokens_per_microbatch, issue 31) against
 * the padded micro-batches, as the trainer runs them (core/train/trainer.c micro_step): a ragged
 * rollout (3 prompts of 9, 5 and 3 tokens, G = 4 completions of 1 to 24 tokens) goes through
 * forward, loss and backward once padded (grpo_seqbatch_from_rollout, every row in full) and once
 * packed (grpo_seqbatch_pack_rollout: the rows of a micro-batch back to back, one segment each,
 * cut into packs of at most K tokens), each pack's loss with its micro-batch's normalisers
 * (grpo_loss_opts.norm_rows, norm_tokens).
 *
 * What must hold, for every loss type (grpo, bnpo, dr_grpo, dapo, cispo, sapo, and GSPO =
 * importance_sampling_level sequence) with the KL term and the entropy bonus on, off the policy
 * (old log-probs and reference log-probs differ from the policy's, so the ratios and the KL are
 * not trivial), with one micro-batch or three, and with one pack per micro-batch or several:
 *   - the completion log-probs are the padded ones bit for bit (the cpu forward is batch
 *     invariant: a segment computes with the bits of the sequence alone, kernels/cpu/attend.c);
 *   - the summed loss equals the padded run's within 1e-6 relative (the same terms; only the
 *     order of the double sums differs);
 *   - every parameter gradient is within 1e-5 of the largest gradient entry and the gradient's
 *     norm within 1e-5 relative (the same products, summed over tokens in other groupings).
 * Also with gradient checkpointing, LoRA adapters and the MoE pack (whose router statistics count
 * segment ids > 0 as real tokens, and whose seq_aux loss takes each segment as a sequence). A
 * packed loss normalised by the pack instead of the micro-batch is off by the ratio of their rows
 * or tokens, far outside these bounds.
 *
 * The suite runs on GRPO_TEST_BACKEND (tests/test_backend.h): test_packed_training_cuda on a GPU,
 * test_packed_training_cuda_emu under the host emulation of kernels/cuda in its strict mode
 * (tests/cuda_models.cmake). There the completion log-probs are compared within 1e-5 relative
 * instead of bit for bit: a segment's attention has the bits of its row alone
 * (tests/test_cuda_attention_segments.c), but the GEMMs (cuBLAS, OpenBLAS under the emulation)
 * make no promise of the same bits for another row count.
 *
 * With train.shared_prefix (fixture.share): the padded run with the model's shared prefix (each
 * prompt's layers once per micro-batch) against packs whose rows of one prompt share it (parent
 * and child segments, ABI 1.8, grpo_seqbatch_pack_rollout share = 1): the same three bounds, the
 * log-probs bit for bit (a child's queries see [parent | own] keys as one sequence, as a padded
 * completion sees [prefix | own]), and a pack holding a whole micro-batch computes fewer tokens
 * than the unshared pack. Without the parent's keys the log-probs differ; without the children's
 * gradients into the parent's keys the gradient is off by ~40 % of its norm (both tried). On cuda
 * (kernels/cuda/attention.cu: a child walks [parent | own keys] as prefix attention walks
 * [prefix | own keys]) the log-probs within 1e-5 relative, as above.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "kernels.h"
#include "train/loss.h"
#include "train/seqbatch.h"
#include "test_backend.h"

enum { NP = 3, G = 4, N = NP * G, P = 9, T = 24 };
static const int32_t plen[NP] = {9, 5, 3};
static const int32_t clen[N] = {1, 24, 2, 3, 22, 4, 1, 5, 17, 2, 24, 6}; /* very ragged */

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora;
    int32_t prompt[NP * P], pmask[NP * P];
    grpo_rollout r;
    float mask[N * T], adv[N], old_logp[N * T], ref_logp[N * T];
    grpo_seqbatch sb;
    float aux_weight; /* d loss / d aux of each pass (MoE; 0 = none) */
    int share;        /* train.shared_prefix: padded with the model's shared prefix, packs that
                       * share their groups' prompts (parent and child segments) */
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static int32_t draw(uint32_t *s, int32_t V) {
    *s = *s * 1103515245u + 12345u;
    return (int32_t)(*s >> 8) % (V - 1) + 1;
}

/* Left-padded prompts, completions of clen tokens (one observation token masked out of the loss
 * in row 4, as a multi-turn row has), advantages of both signs. */
static void make_rollout(fixture *f, int32_t V) {
    uint32_t s = 4242;
    for (int32_t b = 0; b < NP; b++)
        for (int32_t c = 0; c < P; c++) {
            int real = c >= P - plen[b];
            f->prompt[b * P + c] = real ? draw(&s, V) : 0;
            f->pmask[b * P + c] = real;
        }
    grpo_rollout *r = &f->r;
    r->N = N, r->T = T;
    r->ids = calloc(N * T, sizeof *r->ids), r->len = calloc(N, sizeof *r->len);
    r->mask = calloc(N * T, sizeof *r->mask);
    for (int32_t i = 0; i < N; i++) {
        r->len[i] = clen[i];
        f->adv[i] = (float)sin(1.7 * i + 0.2);
        for (int32_t j = 0; j < T; j++) {
            int real = j < clen[i];
            r->ids[i * T + j] = real ? draw(&s, V) : 0;
            f->mask[i * T + j] = r->mask[i * T + j] = real && !(i == 4 && j == 3);
            f->old_logp[i * T + j] = real ? (float)(-2.0 - 0.3 * cos(0.9 * (i * T + j))) : 0.0f;
            f->ref_logp[i * T + j] = real ? (float)(-2.5 + 0.4 * sin(0.5 * (i * T + j))) : 0.0f;
        }
    }
}

static void fixture_open(fixture *f, const char *base, int trainable) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = test_backend_open(0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, base);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, trainable, &err), &err);
    make_rollout(f, f->m->desc->vocab_size(f->m->inst));
}

static void fixture_close(fixture *f) {
    grpo_seqbatch_free(&f->sb);
    free(f->r.ids), free(f->r.len), free(f->r.mask);
    grpo_lora_free(&f->lora);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

typedef struct result {
    float logp[N * T];
    double loss, aux; /* summed over the passes */
    float *grads;
    size_t n_grads;
    int passes;
    int64_t tokens; /* the packs' cells: the tokens computed */
} result;

/* The tokens of a pack of rows [r0, r0+n): each row's prompt and completion, or (share) a
 * group's prompt once and one cell more per further row (its copy of the prompt's last token). */
static int64_t pack_tokens(int32_t r0, int32_t n, int share) {
    int64_t t = 0;
    for (int32_t i = r0; i < r0 + n; i++)
        t += (share && i > r0 && i / G == (i - 1) / G ? 1 : plen[i / G]) + clen[i];
    return t;
}

/* One forward/backward pass over rows [r0, r0+rows) in f->sb, as trainer.c's micro_policy. */
static void pass(fixture *f, int32_t r0, int32_t rows, const grpo_loss_opts *lo, result *out) {
    grpo_error err;
    grpo_error_init(&err);
    float logp[N * T], ent[N * T], dl[N * T], de[N * T];
    f->sb.aux_weight = f->aux_weight;
    ck_ok(grpo_seqbatch_forward(&f->sb, f->m, 1, 1.0f, &err), &err);
    if (f->m->desc->aux_loss) out->aux += f->m->desc->aux_loss(f->m->inst);
    grpo_seqbatch_completion(&f->sb, f->sb.logp, T, logp);
    grpo_seqbatch_completion(&f->sb, f->sb.entropy, T, ent);
    memcpy(out->logp + (size_t)r0 * T, logp, (size_t)rows * T * sizeof(float));
    grpo_loss_inputs in = {logp, f->old_logp + r0 * T, f->ref_logp + r0 * T, f->mask + r0 * T,
                           f->adv + r0, ent, rows, T, NULL};
    grpo_loss_metrics m;
    ck_ok(grpo_loss_forward(&m, &in, lo, &err), &err);
    ck_ok(grpo_loss_backward(dl, &in, lo, &err), &err);
    ck_ok(grpo_loss_entropy_backward(de, &in, lo, &err), &err);
    out->loss += m.loss;
    grpo_seqbatch_scatter(&f->sb, dl, T, f->sb.dlogp);
    grpo_seqbatch_scatter(&f->sb, de, T, f->sb.dentropy);
    ck_ok(grpo_seqbatch_backward(&f->sb, f->m, 1, 1.0f, &err), &err);
    out->passes++;
}

/* The whole rollout in micro-batches of micro rows: padded (K = 0) or packed into packs of at
 * most K tokens, each pack normalised as its micro-batch. */
static result *train(fixture *f, const grpo_loss_opts *base, int32_t micro, int64_t K) {
    grpo_error err;
    grpo_error_init(&err);
    result *out = calloc(1, sizeof *out);
    if (f->lora.n) grpo_lora_zero_grad(&f->lora);
    else grpo_model_zero_grad(f->m);
    grpo_loss_opts lo = *base;
    lo.grad_accum_steps = (N + micro - 1) / micro;
    lo.num_items_in_batch = grpo_mask_sum(f->mask, N, T);
    for (int32_t r0 = 0; r0 < N; r0 += micro) {
        int32_t rows = N - r0 < micro ? N - r0 : micro;
        grpo_loss_opts plo = lo;
        if (K > 0) /* the micro-batch's normalisers (trainer.c micro_step) */
            plo.norm_rows = rows, plo.norm_tokens = grpo_mask_sum(f->mask + r0 * T, rows, T);
        for (int32_t p0 = r0, n; p0 < r0 + rows; p0 += n) {
            n = K > 0 ? grpo_seqbatch_pack_fit(f->pmask, P, G, &f->r, p0, r0 + rows - p0, K,
                                               f->share)
                      : rows;
            if (K > 0) {
                ck_ok(grpo_seqbatch_pack_rollout(&f->sb, f->ops, f->prompt, f->pmask, P, G, &f->r,
                                                 p0, n, f->share, &err), &err);
                ck_assert_int_eq(f->sb.B, 1);
                ck_assert_int_le(f->sb.T, K);
                ck_assert_int_eq(f->sb.T, pack_tokens(p0, n, f->share));
                for (int32_t c = 0; c < f->sb.T; c++) ck_assert_int_gt(f->sb.mask[c], 0);
                out->tokens += f->sb.T;
            } else {
                ck_ok(grpo_seqbatch_from_rollout(&f->sb, f->ops, f->prompt, f->pmask, P, G,
                                                 &f->r, p0, n, T, 0, &err), &err);
                if (!f->share) f->sb.shared_prefix = 0;
            }
            pass(f, p0, n, &plo, out);
        }
    }
    const float *g = f->lora.n ? f->lora.block + f->lora.floats : f->m->grads;
    out->n_grads = f->lora.n ? f->lora.floats : f->m->section;
    out->grads = malloc(out->n_grads * sizeof(float));
    f->ops->sync(f->ops->ctx);
    f->ops->download(f->ops->ctx, out->grads, g, out->n_grads * sizeof(float));
    return out;
}

static void result_free(result *r) { free(r->grads), free(r); }

/* Packed against padded: the bounds of the header. */
static void compare(const char *what, const result *packed, const result *padded,
                    int bitwise_logp) {
    if (bitwise_logp && strcmp(test_backend_name(), "cpu") == 0)
        ck_assert_msg(memcmp(packed->logp, padded->logp, sizeof padded->logp) == 0,
                      "%s: packed log-probs differ from the padded ones", what);
    else
        for (int i = 0; i < N * T; i++)
            ck_assert_msg(fabs(packed->logp[i] - padded->logp[i]) <=
                              1e-5 * (1 + fabs(padded->logp[i])),
                          "%s: logp[%d] packed %.9g padded %.9g", what, i, packed->logp[i],
                          padded->logp[i]);
    ck_assert_msg(fabs(packed->loss - padded->loss) <= 1e-6 * fabs(padded->loss),
                  "%s: loss packed %.12g, padded %.12g", what, packed->loss, padded->loss);
    ck_assert_uint_eq(packed->n_grads, padded->n_grads);
    double mx = 0, dd = 0, nn = 0;
    for (size_t i = 0; i < padded->n_grads; i++) {
        double a = packed->grads[i], b = padded->grads[i];
        mx = fmax(mx, fabs(b)), dd += (a - b) * (a - b), nn += b * b;
    }
    ck_assert_msg(mx > 0, "%s: the gradient is 0: the comparison would prove nothing", what);
    ck_assert_msg(sqrt(dd) <= 1e-5 * sqrt(nn), "%s: gradient differs by %g of its norm", what,
                  sqrt(dd / nn));
    for (size_t i = 0; i < padded->n_grads; i++)
        ck_assert_msg(fabs(packed->grads[i] - padded->grads[i]) <= 1e-5 * mx,
                      "%s: grad[%zu] packed %.9g padded %.9g (largest %g)", what, i,
                      packed->grads[i], padded->grads[i], mx);
}

/* The loss types of the header; GSPO is grpo at sequence level. */
static grpo_loss_opts loss_case(int k, const char **name) {
    static const char *const names[] = {"grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo",
                                        "gspo"};
    grpo_loss_opts o = grpo_loss_opts_default();
    o.type = k == 6 ? GRPO_LOSS_GRPO : (grpo_loss_type)k;
    if (k == 6) o.is_level = GRPO_IS_SEQUENCE;
    if (k == 4) o.epsilon_high = 5.0;
    o.beta = 0.04, o.entropy_coef = 0.01, o.max_completion_length = T;
    *name = names[k];
    return o;
}

/* Every loss type: one micro-batch and three (micro 5), packs as large as the longest row
 * (several per micro-batch) and as large as a whole micro-batch (one). */
static void every_loss_type(fixture *f, const char *model, int bitwise_logp, int types) {
    int64_t longest = P + T, whole = (int64_t)N * (P + T);
    for (int k = 0; k < types; k++) {
        const char *name;
        grpo_loss_opts o = loss_case(k, &name);
        for (int32_t micro = N; micro >= 5; micro = micro == N ? 5 : 0) {
            result *padded = train(f, &o, micro, 0);
            for (int64_t K = longest; K; K = K == longest ? whole : 0) {
                result *packed = train(f, &o, micro, K);
                char what[160];
                snprintf(what, sizeof what, "%s, %s, micro-batch %d, K = %lld (%d passes)", model,
                         name, micro, (long long)K, packed->passes);
                if (K == longest) ck_assert_int_gt(packed->passes, padded->passes);
                if (f->share && K == whole) /* the groups' prompts once: fewer tokens */
                    ck_assert_int_lt(packed->tokens, pack_tokens(0, N, 0));
                compare(what, packed, padded, bitwise_logp);
                result_free(packed);
            }
            result_free(padded);
        }
    }
}

START_TEST(packed_equals_padded_for_every_loss_type) {
    fixture f;
    fixture_open(&f, "dense/llama", 1);
    every_loss_type(&f, "llama", 1, 7);
    fixture_close(&f);
}
END_TEST

/* With train.shared_prefix: packs whose rows share their prompts against the padded layout with
 * the model's shared prefix (each prompt's layers once), as the trainer pairs them. */
START_TEST(shared_packs_equal_the_padded_shared_prefix_for_every_loss_type) {
    fixture f;
    fixture_open(&f, "dense/llama", 1);
    f.share = 1;
    every_loss_type(&f, "llama, shared prompts", 1, 7);
    fixture_close(&f);
}
END_TEST

START_TEST(shared_packs_with_checkpointing_and_lora) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/qwen3", 1);
    f.share = 1;
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 1, &err), &err);
    every_loss_type(&f, "qwen3 with gradient checkpointing, shared prompts", 1, 2);
    fixture_close(&f);
    fixture_open(&f, "dense/llama", 0);
    f.share = 1;
    grpo_lora_opts o = {4, 8.0, 0, "all-linear", 0.0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/lora/llama", GRPO_SOURCE_DIR);
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f.lora, dir, &err), &err);
    every_loss_type(&f, "llama with LoRA, shared prompts", 1, 2);
    fixture_close(&f);
}
END_TEST

START_TEST(packed_with_gradient_checkpointing) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/qwen3", 1);
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 1, &err), &err);
    every_loss_type(&f, "qwen3 with gradient checkpointing", 1, 2);
    fixture_close(&f);
}
END_TEST

START_TEST(packed_with_lora_adapters) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/llama", 0);
    grpo_lora_opts o = {4, 8.0, 0, "all-linear", 0.0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/lora/llama", GRPO_SOURCE_DIR);
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f.lora, dir, &err), &err);
    every_loss_type(&f, "llama with LoRA", 1, 2);
    fixture_close(&f);
}
END_TEST

START_TEST(packed_moe) {
    fixture f;
    fixture_open(&f, "moe/minimind2", 1);
    every_loss_type(&f, "minimind2 (MoE)", 1, 2);
    fixture_close(&f);
}
END_TEST

/* The MoE router's aux loss counts each segment of a packed row as a sequence of its own
 * (MiniMind2's seq_aux: per sequence, its real tokens only), so a pack holding a micro-batch's
 * rows gives the padded micro-batch's aux loss and aux gradient (aux_weight 0.5 here). Counted
 * per row, the pack would be one long sequence: another value. */
START_TEST(packed_moe_aux_loss_counts_each_segment) {
    fixture f;
    fixture_open(&f, "moe/minimind2", 1);
    f.aux_weight = 0.5f;
    const char *name;
    grpo_loss_opts o = loss_case(0, &name);
    for (int32_t micro = N; micro >= 5; micro = micro == N ? 5 : 0) {
        result *padded = train(&f, &o, micro, 0), *packed = train(&f, &o, micro, N * (P + T));
        ck_assert_int_eq(packed->passes, padded->passes);
        ck_assert_msg(padded->aux > 0 && fabs(packed->aux - padded->aux) <= 1e-6 * padded->aux,
                      "micro-batch %d: aux loss packed %.9g, padded %.9g", micro, packed->aux,
                      padded->aux);
        compare("minimind2 with its aux loss", packed, padded, 1);
        result_free(padded), result_free(packed);
    }
    fixture_close(&f);
}
END_TEST

/* The pack's layout: segment k + 1 per row, positions from 0 in each, targets at the cell before
 * each completion token, the mapping back to (row, j). */
START_TEST(a_pack_lays_out_its_rows_back_to_back) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/llama", 1);
    ck_ok(grpo_seqbatch_pack_rollout(&f.sb, f.ops, f.prompt, f.pmask, P, G, &f.r, 3, 3, 0, &err),
          &err);
    int32_t want = plen[0] + clen[3] + plen[1] + clen[4] + plen[1] + clen[5]; /* rows 3, 4, 5 */
    ck_assert_int_eq(f.sb.T, want);
    ck_assert_int_eq(f.sb.rows, 3);
    int32_t at = 0;
    for (int32_t k = 0; k < 3; k++) {
        int32_t i = 3 + k, b = i / G, n = plen[b] + clen[i];
        for (int32_t c = 0; c < n; c++) {
            ck_assert_int_eq(f.sb.mask[at + c], k + 1);
            ck_assert_int_eq(f.sb.pos[at + c], c);
            int32_t id = c < plen[b] ? f.prompt[b * P + P - plen[b] + c]
                                     : f.r.ids[i * T + c - plen[b]];
            ck_assert_int_eq(f.sb.ids[at + c], id);
            int32_t tg = c + 1 < n && c + 1 >= plen[b] ? f.r.ids[i * T + c + 1 - plen[b]] : -1;
            ck_assert_int_eq(f.sb.targets[at + c], tg);
        }
        ck_assert_int_eq(f.sb.row_col[k], at + plen[b] - 1);
        ck_assert_int_eq(f.sb.row_len[k], clen[i]);
        at += n;
    }
    /* from row 3 in packs of at most 20 tokens: row 3 (9 + 3) alone, row 4 (5 + 22) next */
    ck_assert_int_eq(grpo_seqbatch_pack_fit(f.pmask, P, G, &f.r, 3, 9, 20, 0), 1);
    ck_assert_int_eq(grpo_seqbatch_pack_fit(f.pmask, P, G, &f.r, 5, 3, 100, 0), 3);
    fixture_close(&f);
}
END_TEST

/* Sharing prompts: rows 3 (prompt 0) and 4, 5 (prompt 1) as parent 1 = prompt 0 but its last
 * token, child 1 << 16 | 1 = [that token | row 3's completion], parent 2 = prompt 1 but its
 * last, children 2 << 16 | 2 and 2 << 16 | 3 = [prompt 1's last token | row 4's, 5's]; a child's
 * positions continue its parent's; its first cell predicts its first completion token. */
START_TEST(a_shared_pack_lays_out_parents_and_children) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/llama", 1);
    ck_ok(grpo_seqbatch_pack_rollout(&f.sb, f.ops, f.prompt, f.pmask, P, G, &f.r, 3, 3, 1, &err),
          &err);
    ck_assert_int_eq(f.sb.T, plen[0] + clen[3] + plen[1] + clen[4] + 1 + clen[5]);
    int32_t at = 0;
    for (int32_t k = 0; k < 3; k++) {
        int32_t i = 3 + k, b = i / G, L = plen[b];
        const int32_t *pr = f.prompt + b * P + P - L;
        if (k != 2) { /* a new prompt: its parent */
            for (int32_t c = 0; c < L - 1; c++) {
                ck_assert_int_eq(f.sb.mask[at + c], b + 1);
                ck_assert_int_eq(f.sb.pos[at + c], c);
                ck_assert_int_eq(f.sb.ids[at + c], pr[c]);
                ck_assert_int_eq(f.sb.targets[at + c], -1);
            }
            at += L - 1;
        }
        for (int32_t c = 0; c <= clen[i]; c++) {
            ck_assert_int_eq(f.sb.mask[at + c], (b + 1) << 16 | (k + 1));
            ck_assert_int_eq(f.sb.pos[at + c], L - 1 + c);
            ck_assert_int_eq(f.sb.ids[at + c], c ? f.r.ids[i * T + c - 1] : pr[L - 1]);
            ck_assert_int_eq(f.sb.targets[at + c], c < clen[i] ? f.r.ids[i * T + c] : -1);
        }
        ck_assert_int_eq(f.sb.row_col[k], at);
        at += 1 + clen[i];
    }
    /* from row 4 in packs of 34 tokens: 5 + 22, then 1 + 4 more is 32, then 1 + 1 is 34; the
     * next (row 7, prompt 1's last, 1 + 5) no longer fits */
    ck_assert_int_eq(grpo_seqbatch_pack_fit(f.pmask, P, G, &f.r, 4, 8, 34, 1), 3);
    ck_assert_int_eq(grpo_seqbatch_pack_fit(f.pmask, P, G, &f.r, 4, 8, 34, 0), 1);
    fixture_close(&f);
}
END_TEST

int main(void) {
    test_backend_require();
    Suite *s = suite_create("packed_training");
    TCase *tc = tcase_create("packed");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, a_pack_lays_out_its_rows_back_to_back);
    tcase_add_test(tc, a_shared_pack_lays_out_parents_and_children);
    tcase_add_test(tc, packed_equals_padded_for_every_loss_type);
    tcase_add_test(tc, shared_packs_equal_the_padded_shared_prefix_for_every_loss_type);
    tcase_add_test(tc, shared_packs_with_checkpointing_and_lora);
    tcase_add_test(tc, packed_with_gradient_checkpointing);
    tcase_add_test(tc, packed_with_lora_adapters);
    tcase_add_test(tc, packed_moe);
    tcase_add_test(tc, packed_moe_aux_loss_counts_each_segment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
