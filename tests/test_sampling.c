/*
 * test_sampling.c — logits processors against transformers' own (fixture made by
 * tools/make_sampling_fixtures.py), and the token draw.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "host/sampling.h"
#include "host/testing.h"

#define FIXTURE GRPO_SOURCE_DIR "/tests/fixtures/sampling/processors.json"

static cJSON *load_fixture(void) {
    FILE *f = fopen(FIXTURE, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", FIXTURE);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ck_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
    text[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_msg(j != NULL, "%s: bad JSON", FIXTURE);
    return j;
}

static float num(const cJSON *o, const char *k) { return (float)cJSON_GetObjectItem(o, k)->valuedouble; }

START_TEST(processors_match_transformers) {
    cJSON *j = load_fixture();
    int V = cJSON_GetObjectItem(j, "vocab")->valueint, c = 0;
    float *logits = malloc(V * sizeof *logits);
    void *scratch = malloc(12 * (size_t)V);
    cJSON *cs;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(j, "cases")) {
        grpo_sampling p = {num(cs, "temperature"), cJSON_GetObjectItem(cs, "top_k")->valueint,
                           num(cs, "top_p"), num(cs, "min_p"), num(cs, "repetition_penalty")};
        int32_t prev[64], n_prev = 0, i = 0;
        cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(cs, "prev")) prev[n_prev++] = x->valueint;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(cs, "logits")) logits[i++] = (float)x->valuedouble;
        grpo_logits_process(&p, logits, V, prev, n_prev, scratch);
        i = 0;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(cs, "processed")) {
            if (cJSON_IsNull(x))
                ck_assert_msg(isinf(logits[i]) && logits[i] < 0, "case %d token %d: kept, reference removed it", c, i);
            else /* same float ops in the same order: equal to float rounding */
                ck_assert_msg(fabsf(logits[i] - (float)x->valuedouble) <= 1e-5f * fmaxf(1.0f, fabsf(logits[i])),
                              "case %d token %d: %g vs %g", c, i, logits[i], x->valuedouble);
            i++;
        }
        c++;
    }
    ck_assert_int_ge(c, 9);
    free(logits);
    free(scratch);
    cJSON_Delete(j);
}
END_TEST

START_TEST(greedy_is_argmax_after_penalty) {
    float logits[4] = {1.0f, 3.0f, 2.9f, -1.0f};
    int32_t prev[] = {1, 1};
    char scratch[12 * 4];
    grpo_sampling p = {0.0f, 0, 1.0f, 0.0f, 1.1f}; /* 3.0/1.1 = 2.727 < 2.9 */
    ck_assert_int_eq(grpo_sample_token(&p, logits, 4, prev, 2, NULL, scratch), 2);
}
END_TEST

START_TEST(draws_follow_the_distribution) {
    /* logits log(0.1), log(0.2), log(0.3), log(0.4): frequencies over 40000 seeded draws within
     * 0.01 of the probabilities (about 4 standard deviations at n = 40000). */
    const double probs[4] = {0.1, 0.2, 0.3, 0.4};
    int counts[4] = {0};
    grpo_rng rng;
    grpo_rng_seed(&rng, 7);
    grpo_sampling p = {1.0f, 0, 1.0f, 0.0f, 1.0f};
    char scratch[12 * 4];
    for (int n = 0; n < 40000; n++) {
        float logits[4];
        for (int i = 0; i < 4; i++) logits[i] = logf((float)probs[i]);
        counts[grpo_sample_token(&p, logits, 4, NULL, 0, &rng, scratch)]++;
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(counts[i] / 40000.0 - probs[i]) < 0.01, "token %d: %d draws", i, counts[i]);
}
END_TEST

START_TEST(filtered_tokens_are_never_drawn) {
    grpo_rng rng;
    grpo_rng_seed(&rng, 3);
    grpo_sampling p = {1.0f, 2, 1.0f, 0.0f, 1.0f};
    char scratch[12 * 5];
    for (int n = 0; n < 2000; n++) {
        float logits[5] = {0.5f, 2.0f, 0.1f, 1.9f, 0.4f};
        int32_t t = grpo_sample_token(&p, logits, 5, NULL, 0, &rng, scratch);
        ck_assert(t == 1 || t == 3);
    }
}
END_TEST

/* transformers' TopPLogitsWarper removes the ascending-sorted tokens whose cumulative probability
 * is <= 1 - top_p: with four equal logits and top_p = 0.5 the cumulative sums 0.25 and 0.5 are
 * removed (0.5 <= 0.5: the boundary is inclusive), 0.75 is not, so exactly 2 tokens stay. */
START_TEST(top_p_boundary_keeps_what_transformers_keeps) {
    grpo_sampling p = {1.0f, 0, 0.5f, 0.0f, 1.0f};
    char scratch[12 * 4];
    float logits[4] = {0.3f, 0.3f, 0.3f, 0.3f};
    grpo_logits_process(&p, logits, 4, NULL, 0, scratch);
    int kept = 0;
    for (int i = 0; i < 4; i++) kept += isfinite(logits[i]);
    ck_assert_int_eq(kept, 2);
    /* grpo breaks ties by index, so the last two stay (torch's sort leaves tie order open: only
     * the count is transformers') */
    ck_assert(isinf(logits[0]) && isinf(logits[1]) && isfinite(logits[2]) && isfinite(logits[3]));
    p.top_p = 0.51f; /* 0.5 > 1 - 0.51: the second token now stays */
    float more[4] = {0.3f, 0.3f, 0.3f, 0.3f};
    grpo_logits_process(&p, more, 4, NULL, 0, scratch);
    kept = 0;
    for (int i = 0; i < 4; i++) kept += isfinite(more[i]);
    ck_assert_int_eq(kept, 3);
}
END_TEST

START_TEST(rng_is_deterministic_per_seed) {
    grpo_rng a, b, c;
    grpo_rng_seed(&a, 42);
    grpo_rng_seed(&b, 42);
    grpo_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = grpo_rng_next(a.s);
        ck_assert(x == grpo_rng_next(b.s));
        differ += x != grpo_rng_next(c.s);
    }
    ck_assert_int_gt(differ, 95);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("sampling");
    tcase_add_test(tc, processors_match_transformers);
    tcase_add_test(tc, greedy_is_argmax_after_penalty);
    tcase_add_test(tc, draws_follow_the_distribution);
    tcase_add_test(tc, filtered_tokens_are_never_drawn);
    tcase_add_test(tc, top_p_boundary_keeps_what_transformers_keeps);
    tcase_add_test(tc, rng_is_deterministic_per_seed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
