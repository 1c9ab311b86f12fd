/*
 * test_sdk_ops_layout.c — the op table (grpo/ops.h), generated from the op list
 * (grpo/ops_list.h), keeps the layout of ABI 1.6 byte for byte: every member at its offset and
 * the struct at its size. Also: the list's minors only grow, grpo_ops_supports tells a table
 * too old or an op left NULL apart, and the cpu backend fills every op that is not optional.
 */
#include <check.h>
#include <stddef.h>
#include <string.h>

#include "grpo/grpo.h"
#include "kernels.h"

/* offsetof of every member and sizeof(grpo_ops) of the hand-written 1.6 header at commit
 * 6f34f93 (before the op list), obtained by compiling `git show 6f34f93:sdk/include/grpo/ops.h`
 * in a throwaway program printing offsetof(grpo_ops, m) for each member m (gcc, x86-64). */
static const struct {
    const char *member;
    size_t offset;
} layout_1_6[] = {
    {"struct_size", 0},
    {"name", 8},
    {"ctx", 16},
    {"alloc", 24},
    {"free", 32},
    {"upload", 40},
    {"download", 48},
    {"copy", 56},
    {"zero", 64},
    {"sync", 72},
    {"embedding_forward", 80},
    {"embedding_backward", 88},
    {"matmul_forward", 96},
    {"matmul_backward", 104},
    {"rmsnorm_forward", 112},
    {"rmsnorm_backward", 120},
    {"rope_forward", 128},
    {"rope_backward", 136},
    {"attention_forward", 144},
    {"attention_backward", 152},
    {"attention_decode", 160},
    {"swiglu_forward", 168},
    {"swiglu_backward", 176},
    {"residual_forward", 184},
    {"accumulate", 192},
    {"head_forward", 200},
    {"head_backward", 208},
    {"adamw", 216},
    {"sumsq", 224},
    {"scale", 232},
    {"gather_rows", 240},
    {"scatter_add_rows", 248},
    {"scatter_add_rows_backward", 256},
    {"head_backward_entropy", 264},
    {"convert", 272},
    {"matmul_forward_w", 280},
    {"matmul_backward_w", 288},
    {"embedding_forward_w", 296},
    {"head_forward_w", 304},
    {"head_backward_w", 312},
    {"dropout", 320},
    {"prefix_attention_forward", 328},
    {"prefix_attention_backward", 336},
    {"sample_rows", 344},
};
#define OPS_SIZE_1_6 352

/* The members of today's grpo_ops with their offsets, in declaration order: the three header
 * members, then one per entry of the list. */
#define MEMBER_OFFSET(D, minor, optional, ret, name, params) {#name, offsetof(grpo_ops, name)},
static const struct {
    const char *member;
    size_t offset;
} layout_now[] = {
    {"struct_size", offsetof(grpo_ops, struct_size)},
    {"name", offsetof(grpo_ops, name)},
    {"ctx", offsetof(grpo_ops, ctx)},
    GRPO_OPS_LIST(MEMBER_OFFSET, ~)
};
#undef MEMBER_OFFSET

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* 1.7 appended one op (logits_logp) after the 1.6 table, which stays its prefix, 1.9 one
 * more (attention_decode_paged) after it, and 1.12 one after that (parallel_for). */
START_TEST(the_generated_table_keeps_the_1_6_layout) {
    const size_t fn = sizeof(void (*)(void));
    ck_assert_uint_eq(sizeof(grpo_ops), OPS_SIZE_1_6 + 3 * fn);
    ck_assert_uint_eq(COUNT(layout_now), COUNT(layout_1_6) + 3);
    for (size_t i = 0; i < COUNT(layout_1_6); i++) {
        ck_assert_str_eq(layout_now[i].member, layout_1_6[i].member);
        ck_assert_uint_eq(layout_now[i].offset, layout_1_6[i].offset);
    }
    ck_assert_str_eq(layout_now[COUNT(layout_1_6)].member, "logits_logp");
    ck_assert_uint_eq(layout_now[COUNT(layout_1_6)].offset, OPS_SIZE_1_6);
    ck_assert_str_eq(layout_now[COUNT(layout_1_6) + 1].member, "attention_decode_paged");
    ck_assert_uint_eq(layout_now[COUNT(layout_1_6) + 1].offset, OPS_SIZE_1_6 + fn);
    ck_assert_str_eq(layout_now[COUNT(layout_1_6) + 2].member, "parallel_for");
    ck_assert_uint_eq(layout_now[COUNT(layout_1_6) + 2].offset, OPS_SIZE_1_6 + 2 * fn);
}
END_TEST

START_TEST(each_member_by_name_is_where_1_6_put_it) {
    /* spelled out for the header members (not generated), the list's through layout_now */
    ck_assert_uint_eq(offsetof(grpo_ops, struct_size), layout_1_6[0].offset);
    ck_assert_uint_eq(offsetof(grpo_ops, name), layout_1_6[1].offset);
    ck_assert_uint_eq(offsetof(grpo_ops, ctx), layout_1_6[2].offset);
    ck_assert_uint_eq(offsetof(grpo_ops, alloc), layout_1_6[3].offset);
    ck_assert_uint_eq(offsetof(grpo_ops, sample_rows), layout_1_6[COUNT(layout_1_6) - 1].offset);
}
END_TEST

START_TEST(the_list_is_append_only_by_minor) {
    static const int minors[] = {
#define MINOR(D, minor, optional, ret, name, params) minor,
        GRPO_OPS_LIST(MINOR, ~)
#undef MINOR
    };
    for (size_t i = 1; i < COUNT(minors); i++) ck_assert_int_ge(minors[i], minors[i - 1]);
    ck_assert_int_le(minors[COUNT(minors) - 1], GRPO_ABI_MINOR);
}
END_TEST

START_TEST(supports_reads_struct_size_and_null) {
    grpo_ops o;
    memset(&o, 0xff, sizeof o); /* every op pointer non-NULL (never called) */
    o.struct_size = sizeof o;
    o.sample_rows = NULL;
    ck_assert(grpo_ops_supports(&o, sync));
    ck_assert(!grpo_ops_supports(&o, sample_rows)); /* left NULL */
    /* a 1.5 table ends after dropout: the 1.6 ops are past its end, whatever the memory holds */
    o.struct_size = (uint32_t)(offsetof(grpo_ops, dropout) + sizeof o.dropout);
    ck_assert(grpo_ops_supports(&o, sync));
    ck_assert(!grpo_ops_supports(&o, prefix_attention_forward));
}
END_TEST

START_TEST(cpu_fills_every_op_that_is_not_optional) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    ck_assert_msg(ops != NULL, "%s", err.message);
    ck_assert_uint_eq(ops->struct_size, sizeof(grpo_ops));
#define FILLED(D, minor, optional, ret, name, params) \
    ck_assert_msg((optional) || ops->name != NULL, "cpu lacks %s", #name);
    GRPO_OPS_LIST(FILLED, ~)
#undef FILLED
    ck_assert(!grpo_ops_supports(ops, sample_rows)); /* the host draws on cpu */
    ck_assert(grpo_ops_supports(ops, prefix_attention_backward));
    grpo_backend_close(ops);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdk_ops_layout");
    TCase *tc = tcase_create("ops_layout");
    tcase_add_test(tc, the_generated_table_keeps_the_1_6_layout);
    tcase_add_test(tc, each_member_by_name_is_where_1_6_put_it);
    tcase_add_test(tc, the_list_is_append_only_by_minor);
    tcase_add_test(tc, supports_reads_struct_size_and_null);
    tcase_add_test(tc, cpu_fills_every_op_that_is_not_optional);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
