/*
 * test_sdk_model_abi.c — ABI 1.3 to 1.5 of the model interface (grpo/model.h, grpo/ops.h): a
 * descriptor from a pack built before 1.3 is told apart from a 1.3 one by struct_size alone, the
 * init hints of grpo_param_desc.flags are one field that a pre-1.3 pack leaves at "no hint", and
 * each minor's slots come after the previous minor's.
 */
#include <check.h>
#include <stddef.h>

#include "grpo/grpo.h"

static int32_t vocab_264(void *model) {
    (void)model;
    return 264;
}

/* The size a pack compiled against 1.2 reports: its struct ended after relayout. */
#define MODEL_DESC_1_2_SIZE (offsetof(grpo_model_desc, relayout) + sizeof(void (*)(void)))

START_TEST(abi_is_at_least_1_3) {
    ck_assert_int_eq(GRPO_ABI_MAJOR, 1);
    ck_assert_int_ge(GRPO_ABI_MINOR, 3);
}
END_TEST

START_TEST(a_1_2_model_desc_lacks_vocab_size) {
    /* The host reads a 1.2 descriptor through the 1.3 type; only struct_size tells them apart. */
    grpo_model_desc d = {.struct_size = (uint32_t)MODEL_DESC_1_2_SIZE, .id = "old.lm",
                         .vocab_size = vocab_264};
    ck_assert(GRPO_HAS_FIELD(&d, grpo_model_desc, relayout));
    ck_assert(!GRPO_HAS_FIELD(&d, grpo_model_desc, vocab_size));
    d.struct_size = sizeof d;
    ck_assert(GRPO_HAS_FIELD(&d, grpo_model_desc, vocab_size));
    ck_assert_int_eq(d.vocab_size(NULL), 264);
}
END_TEST

START_TEST(each_minor_appends_its_slots) {
    /* append-only: the 1.3 slot comes after every slot of 1.2, the 1.4 slots right after it, the
     * 1.5 slot after them, and the struct ends with it */
    const size_t fn = sizeof(void (*)(void));
    ck_assert_uint_gt(offsetof(grpo_model_desc, vocab_size), offsetof(grpo_model_desc, relayout));
    ck_assert_uint_eq(offsetof(grpo_model_desc, vocab_size), MODEL_DESC_1_2_SIZE);
    ck_assert_uint_eq(offsetof(grpo_model_desc, backward_entropy),
                      offsetof(grpo_model_desc, vocab_size) + fn);
    ck_assert_uint_eq(offsetof(grpo_model_desc, set_lora),
                      offsetof(grpo_model_desc, backward_entropy) + fn);
    /* 1.5: bind_typed right after set_lora, then set_gradient_checkpointing, last */
    ck_assert_uint_eq(offsetof(grpo_model_desc, bind_typed),
                      offsetof(grpo_model_desc, set_lora) + fn);
    ck_assert_uint_eq(offsetof(grpo_model_desc, set_gradient_checkpointing),
                      offsetof(grpo_model_desc, bind_typed) + fn);
    /* 1.6: set_shared_prefix after them, last */
    ck_assert_uint_eq(offsetof(grpo_model_desc, set_shared_prefix),
                      offsetof(grpo_model_desc, set_gradient_checkpointing) + fn);
    /* 1.9: kv_page_floats (a paged KV cache) after it, last */
    ck_assert_uint_eq(offsetof(grpo_model_desc, kv_page_floats),
                      offsetof(grpo_model_desc, set_shared_prefix) + fn);
    /* 1.10: keep_rollout (a rollout's kept activations) after it, last; grpo_batch.kept after
     * aux_weight, last */
    ck_assert_uint_eq(offsetof(grpo_model_desc, keep_rollout),
                      offsetof(grpo_model_desc, kv_page_floats) + fn);
    /* 1.11: grpo_rollout_keep.written (a keep another instance wrote) after row_of, last */
    ck_assert_uint_eq(offsetof(grpo_rollout_keep, written),
                      offsetof(grpo_rollout_keep, row_of) + sizeof(void *));
    ck_assert_uint_eq(sizeof(grpo_rollout_keep),
                      offsetof(grpo_rollout_keep, written) + sizeof(void *));
    /* 1.11: set_lora_rows (the base's rows beside the adapted ones) after it, last */
    ck_assert_uint_eq(offsetof(grpo_model_desc, set_lora_rows),
                      offsetof(grpo_model_desc, keep_rollout) + fn);
    ck_assert_uint_eq(sizeof(grpo_model_desc), offsetof(grpo_model_desc, set_lora_rows) + fn);
    ck_assert_uint_eq(offsetof(grpo_batch, kept), offsetof(grpo_batch, aux_weight) + sizeof(float));
    ck_assert_uint_eq(sizeof(grpo_batch), offsetof(grpo_batch, kept) + sizeof(int32_t));
    /* 1.9: the paged cache's fields after R, S (a 1.0 cache's struct_size ends before them) */
    ck_assert_uint_eq(offsetof(grpo_kv_cache, page),
                      offsetof(grpo_kv_cache, S) + sizeof(int32_t));
    ck_assert_uint_lt(offsetof(grpo_kv_cache, page), offsetof(grpo_kv_cache, table_host));
    /* the op table: head_backward_entropy (1.4) after scatter_add_rows_backward (1.0), then the
     * 1.5 typed-weight ops and dropout in order, last */
    ck_assert_uint_eq(offsetof(grpo_ops, head_backward_entropy),
                      offsetof(grpo_ops, scatter_add_rows_backward) + fn);
    const size_t ops_1_5[] = {offsetof(grpo_ops, convert), offsetof(grpo_ops, matmul_forward_w),
                              offsetof(grpo_ops, matmul_backward_w),
                              offsetof(grpo_ops, embedding_forward_w),
                              offsetof(grpo_ops, head_forward_w),
                              offsetof(grpo_ops, head_backward_w), offsetof(grpo_ops, dropout)};
    size_t at = offsetof(grpo_ops, head_backward_entropy);
    for (size_t i = 0; i < sizeof ops_1_5 / sizeof ops_1_5[0]; i++)
        ck_assert_uint_eq(ops_1_5[i], at += fn);
    /* 1.6: the shared-prefix attention pair right after dropout */
    ck_assert_uint_eq(offsetof(grpo_ops, prefix_attention_forward), at += fn);
    ck_assert_uint_eq(offsetof(grpo_ops, prefix_attention_backward), at += fn);
    /* 1.6: sample_rows (sampling on the device) after them */
    ck_assert_uint_eq(offsetof(grpo_ops, sample_rows), at += fn);
    /* 1.7: logits_logp (the sampler's log-probs summed as the head sums) */
    ck_assert_uint_eq(offsetof(grpo_ops, logits_logp), at += fn);
    /* 1.9: attention_decode_paged */
    ck_assert_uint_eq(offsetof(grpo_ops, attention_decode_paged), at += fn);
    /* 1.12: parallel_for (host work on the backend's threads), last */
    ck_assert_uint_eq(offsetof(grpo_ops, parallel_for), at += fn);
    ck_assert_uint_eq(sizeof(grpo_ops), at + fn);
}
END_TEST

START_TEST(init_hints_are_one_field_apart_from_the_1_0_flags) {
    const uint32_t hints[] = {GRPO_PARAM_INIT_DEFAULT, GRPO_PARAM_INIT_NORMAL,
                              GRPO_PARAM_INIT_RESIDUAL, GRPO_PARAM_INIT_ONES,
                              GRPO_PARAM_INIT_ZEROS};
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(hints[i] & ~GRPO_PARAM_INIT_MASK, 0); /* inside the field */
        for (int j = 0; j < i; j++) ck_assert_uint_ne(hints[i], hints[j]); /* distinct */
        /* combined with the 1.0 bits, the hint reads back unchanged */
        uint32_t flags = hints[i] | GRPO_PARAM_NO_DECAY | GRPO_PARAM_TIED;
        ck_assert_uint_eq(flags & GRPO_PARAM_INIT_MASK, hints[i]);
    }
    ck_assert_uint_eq(GRPO_PARAM_INIT_MASK & (GRPO_PARAM_NO_DECAY | GRPO_PARAM_TIED), 0);
    /* a pre-1.3 pack sets only the 1.0 bits: the host sees "no hint" and falls back by name */
    ck_assert_uint_eq((GRPO_PARAM_NO_DECAY | GRPO_PARAM_TIED) & GRPO_PARAM_INIT_MASK,
                      GRPO_PARAM_INIT_DEFAULT);
}
END_TEST

/* A param descriptor named name with flags. */
static grpo_param_desc param(const char *name, uint32_t flags) {
    return (grpo_param_desc){.struct_size = sizeof(grpo_param_desc), .name = name, .ndim = 1,
                             .shape = {4}, .flags = flags, .tied_to = -1};
}

START_TEST(a_hint_decides_the_init) {
    /* the hint wins over the name, whatever the 1.0 bits */
    grpo_param_desc d = param("model.norm.weight", GRPO_PARAM_NO_DECAY | GRPO_PARAM_INIT_ZEROS);
    ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_ZEROS);
    d = param("model.layers.0.attention.wo.weight", GRPO_PARAM_INIT_RESIDUAL);
    ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_RESIDUAL);
    d = param("model.layers.0.mlp.down_proj.weight", GRPO_PARAM_INIT_NORMAL);
    ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_NORMAL);
    d = param("model.layers.0.ffn_norm.weight", GRPO_PARAM_NO_DECAY | GRPO_PARAM_INIT_ONES);
    ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_ONES);
}
END_TEST

START_TEST(without_a_hint_the_name_decides_as_before_1_3) {
    const char *ones[] = {"model.layers.0.input_layernorm.weight", "model.norm.weight",
                          "model.layers.1.self_attn.q_norm.weight"};
    const char *residual[] = {"model.layers.0.self_attn.o_proj.weight",
                              "model.layers.0.mlp.experts.3.down_proj.weight"};
    const char *normal[] = {"model.embed_tokens.weight", "lm_head.weight",
                            "model.layers.0.mlp.gate.weight",
                            "model.layers.0.self_attn.q_proj.bias"};
    for (int i = 0; i < 3; i++) {
        grpo_param_desc d = param(ones[i], GRPO_PARAM_NO_DECAY); /* a 1.2 pack's flags */
        ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_ONES);
    }
    for (int i = 0; i < 2; i++) {
        grpo_param_desc d = param(residual[i], 0);
        ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_RESIDUAL);
    }
    for (int i = 0; i < 4; i++) {
        grpo_param_desc d = param(normal[i], 0);
        ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_NORMAL);
    }
    /* a hint value from a later minor is unknown here: the name decides */
    grpo_param_desc d = param("model.norm.weight", 5u << 2);
    ck_assert_uint_eq(grpo_param_init(&d), GRPO_PARAM_INIT_ONES);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdk_model_abi");
    TCase *tc = tcase_create("model_abi");
    tcase_add_test(tc, abi_is_at_least_1_3);
    tcase_add_test(tc, a_1_2_model_desc_lacks_vocab_size);
    tcase_add_test(tc, each_minor_appends_its_slots);
    tcase_add_test(tc, init_hints_are_one_field_apart_from_the_1_0_flags);
    tcase_add_test(tc, a_hint_decides_the_init);
    tcase_add_test(tc, without_a_hint_the_name_decides_as_before_1_3);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
