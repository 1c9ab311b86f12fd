/* test_loss.c — the GRPO loss, its analytic gradient w.r.t. logp and TRL's loss metrics, against
 * TRL's own GRPOTrainer._compute_loss with PyTorch autograd (tests/fixtures/loss/loss_cases.json,
 * made by tools/make_loss_fixtures_trl.py, each case's "source" naming the trl and torch versions:
 * every loss type, beta 0 and > 0, epsilon_high != epsilon_low, delta, num_iterations > 1, ragged
 * masks, a masked truncated row, grad accumulation; and loss_option_cases.json: GSPO's
 * sequence-level ratio, sapo, the top-entropy mask, the entropy bonus and the importance-sampling
 * correction on the same inputs), and by hand.
 *
 * Tolerances: both sides compute in double from the same float32 inputs; only exp() may differ by
 * an ulp, so loss and metrics agree to ~1e-12: checked at 1e-9 relative. TRL takes the clip
 * ratios (a count over a count) in float32: 1.2e-7 relative, one float32 ulp (a count off by one
 * is 1/n away). dlogp is stored as float32: 1e-6 relative plus 1e-12 absolute (exact zeros where
 * the mask is 0). The importance-sampling cases (is_*) hold their weights in fp32, as the trainer
 * does, so their loss and metrics agree to 1e-6. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/loss.h"
#include "loss_fixture.h"
#include "train/is_correction.h"

START_TEST(one_token_on_policy_by_hand) {
    /* ratio 1, nothing clipped: loss = -A, d loss / d logp = -A (d ratio / d logp = 1). */
    const float logp[] = {-0.7f}, mask[] = {1.0f}, adv[] = {2.0f};
    grpo_loss_inputs in = {logp, NULL, NULL, mask, adv, NULL, 1, 1, NULL};
    grpo_loss_opts o = grpo_loss_opts_default();
    o.type = GRPO_LOSS_GRPO;
    grpo_loss_metrics m;
    float d[1];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_OK);
    ck_assert_int_eq(grpo_loss_backward(d, &in, &o, &err), GRPO_OK);
    ck_assert(m.loss == -2.0 && d[0] == -2.0f);
    ck_assert(isnan(m.kl) && m.clip_region_mean == 0.0 && m.n_tokens == 1.0);
}
END_TEST

START_TEST(kl_by_hand) {
    /* A = 0 leaves only beta * KL: KL = e^d - d - 1 with d = ref - logp = 1; dKL/dlogp = 1 - e. */
    const float logp[] = {-2.0f, 5.0f}, ref[] = {-1.0f, 0.0f}, mask[] = {1.0f, 0.0f}, adv[] = {0};
    grpo_loss_inputs in = {logp, NULL, ref, mask, adv, NULL, 1, 2, NULL};
    grpo_loss_opts o = grpo_loss_opts_default();
    o.type = GRPO_LOSS_BNPO;
    o.beta = 0.5f;
    grpo_loss_metrics m;
    float d[2];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_OK);
    ck_assert_int_eq(grpo_loss_backward(d, &in, &o, &err), GRPO_OK);
    ck_assert(fabs(m.kl - (exp(1.0) - 2.0)) < 1e-12);
    ck_assert(fabs(m.loss - 0.5 * (exp(1.0) - 2.0)) < 1e-12);
    ck_assert(fabs(d[0] - 0.5 * (1.0 - exp(1.0))) < 1e-6);
    ck_assert(d[1] == 0.0f); /* padding */
}
END_TEST

START_TEST(bad_inputs_name_the_problem) {
    const float logp[] = {-1.0f}, mask[] = {1.0f}, adv[] = {1.0f};
    grpo_loss_inputs in = {logp, NULL, NULL, mask, adv, NULL, 1, 1, NULL};
    grpo_loss_opts o = grpo_loss_opts_default();
    grpo_loss_metrics m;
    grpo_error err;
    grpo_error_init(&err);
    o.num_items_in_batch = -1; /* dapo needs the generation batch's token count */
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "num_items_in_batch") != NULL, "%s", err.message);
    o.num_items_in_batch = 1;
    o.beta = 0.1f;
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "ref_logp") != NULL, "%s", err.message);
    o.beta = 0;
    o.type = GRPO_LOSS_DR_GRPO;
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "max_completion_length") != NULL, "%s", err.message);
    o.type = GRPO_LOSS_GRPO;
    const float inf_logp[] = {-INFINITY};
    in.logp = inf_logp;
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "logp[0,0]") != NULL, "%s", err.message);
    in.logp = logp;
    const float nan_adv[] = {NAN};
    in.adv = nan_adv;
    ck_assert_int_eq(grpo_loss_backward(NULL, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "adv[0]") != NULL, "%s", err.message);
}
END_TEST

START_TEST(truncated_completions_are_masked) {
    float mask[] = {1, 1, 1, 1, 1, 0}; /* [2,3] */
    const uint8_t truncated[] = {1, 0};
    ck_assert_int_eq(grpo_mask_truncated(mask, truncated, 2, 3), 1);
    ck_assert(grpo_mask_sum(mask, 2, 3) == 2.0);
    ck_assert(mask[0] == 0 && mask[2] == 0 && mask[3] == 1);
}
END_TEST

/* An optional number of a fixture case (absent in loss_cases.json, which predates it). */
static double json_opt(const cJSON *c, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void check_case(const cJSON *c) {
    const char *name = json_str(c, "name");
    (void)json_str(c, "source"); /* what produced the expected values (a TRL version) */
    grpo_error err;
    grpo_error_init(&err);
    grpo_loss_opts o = grpo_loss_opts_default();
    int type = grpo_choice_index(grpo_choices_loss_type, json_str(c, "type"));
    ck_assert_msg(type >= 0, "%s: unknown loss type '%s'", name, json_str(c, "type"));
    o.type = (grpo_loss_type)type;
    o.epsilon_low = json_num(c, "epsilon_low");
    o.epsilon_high = json_num(c, "epsilon_high");
    o.delta = json_num(c, "delta");
    o.beta = json_num(c, "beta");
    o.max_completion_length = (int)json_num(c, "max_completion_length");
    o.num_items_in_batch = json_num(c, "num_items_in_batch");
    o.grad_accum_steps = (int)json_num(c, "grad_accum_steps");
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(c, "importance_sampling_level");
    o.is_level = cJSON_IsString(lv) && strcmp(lv->valuestring, "sequence") == 0 ? GRPO_IS_SEQUENCE
                                                                              : GRPO_IS_TOKEN;
    o.sapo_temperature_pos = json_opt(c, "sapo_temperature_pos", 1.0);
    o.sapo_temperature_neg = json_opt(c, "sapo_temperature_neg", 1.05);
    o.top_entropy_quantile = json_opt(c, "top_entropy_quantile", 1.0);
    o.entropy_coef = json_opt(c, "entropy_coef", 0.0);
    grpo_loss_inputs in;
    in.N = (int)json_num(c, "N");
    in.T = (int)json_num(c, "T");
    float *logp = json_floats(c, "logp", NULL), *old = json_floats(c, "old_logp", NULL);
    float *ref = json_floats(c, "ref_logp", NULL), *mask = json_floats(c, "mask", NULL);
    float *adv = json_floats(c, "adv", NULL), *ent = json_floats(c, "entropy", NULL);
    in.logp = logp, in.old_logp = old, in.ref_logp = ref, in.mask = mask, in.adv = adv;
    in.entropy = ent;
    in.is_w = NULL;
    float *is_w = NULL; /* the importance-sampling correction: weights from is_correction.c */
    const cJSON *samp_j = cJSON_GetObjectItemCaseSensitive(c, "sampling_logp");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "expect");
    if (samp_j) {
        float *samp = json_floats(c, "sampling_logp", NULL), *want_w = json_floats(e, "is_w", NULL);
        int mode = grpo_choice_index(grpo_choices_is_mode, json_str(c, "is_mode"));
        ck_assert_msg(mode >= 0, "%s: unknown is_mode", name);
        is_w = malloc(sizeof(float) * (size_t)in.N * in.T);
        grpo_is_sums s = grpo_is_sums_init();
        grpo_is_weights(is_w, old ? old : logp, samp, mask, in.N, in.T, (grpo_is_mode)mode,
                        json_num(c, "is_cap"), &s);
        for (int i = 0; i < in.N * in.T; i++)
            ck_assert_close(is_w[i], want_w[i], 1e-6, 1e-6, "%s: is_w[%d]", name, i);
        ck_assert_msg(s.ratio_n > 0 && s.ratio_min >= 0 && s.ratio_max <= json_num(c, "is_cap"),
                      "%s: ratio metrics %g..%g over %g", name, s.ratio_min, s.ratio_max,
                      s.ratio_n);
        in.is_w = is_w;
        free(samp), free(want_w);
    }
    float *want_d = json_floats(e, "dlogp", NULL);
    float *d = malloc(sizeof(float) * (size_t)in.N * in.T);
    grpo_loss_metrics m;
    ck_assert_msg(grpo_loss_forward(&m, &in, &o, &err) == 0, "%s: %s", name, err.message);
    ck_assert_msg(grpo_loss_backward(d, &in, &o, &err) == 0, "%s: %s", name, err.message);
    const struct { const char *key; double got; } metric[] = {
        {"loss", m.loss}, {"policy_loss", m.policy_loss}, {"kl", m.kl}, {"entropy", m.entropy},
        {"clip_low_mean", m.clip_low_mean}, {"clip_high_mean", m.clip_high_mean},
        {"clip_region_mean", m.clip_region_mean}, {"clip_low_min", m.clip_low_min},
        {"clip_high_max", m.clip_high_max}, {"cispo_clip_ratio", m.cispo_clip_ratio},
        {"n_tokens", m.n_tokens}};
    for (size_t k = 0; k < sizeof metric / sizeof metric[0]; k++) {
        /* is_w is fp32 here, double in torch; TRL takes the clip ratios (k / n) in float32 */
        double rel = is_w ? 1e-6 : strncmp(metric[k].key, "clip", 4) == 0 ||
                                           strcmp(metric[k].key, "cispo_clip_ratio") == 0
                                       ? 1.2e-7
                                       : 1e-9;
        ck_assert_close(metric[k].got, json_num(e, metric[k].key), rel, 1e-12, "%s: %s", name,
                        metric[k].key);
    }
    if (o.entropy_coef != 0.0)
        ck_assert_close(m.entropy_bonus, json_num(e, "entropy_bonus"), 1e-9, 1e-12, "%s: %s",
                        name, "entropy_bonus");
    for (int i = 0; i < in.N * in.T; i++)
        ck_assert_close(d[i], want_d[i], 1e-6, 1e-12, "%s: dlogp[%d]", name, i);
    if (o.entropy_coef != 0.0) { /* the bonus's own gradient, d loss / d entropy */
        float *want_de = json_floats(e, "dentropy", NULL);
        ck_assert_msg(grpo_loss_entropy_backward(d, &in, &o, &err) == 0, "%s: %s", name,
                      err.message);
        for (int i = 0; i < in.N * in.T; i++)
            ck_assert_close(d[i], want_de[i], 1e-6, 1e-12, "%s: dentropy[%d]", name, i);
        free(want_de);
    }
    free(logp), free(old), free(ref), free(mask), free(adv), free(ent), free(want_d), free(d);
    free(is_w);
}

START_TEST(matches_pytorch_autograd) {
    cJSON *root = fixture_load("loss_cases.json");
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        check_case(c);
        n++;
    }
    ck_assert_int_ge(n, GRPO_LOSS_TYPE_COUNT - 1); /* every type but sapo (option cases) */
    cJSON_Delete(root);
}
END_TEST

START_TEST(options_match_pytorch_autograd) {
    cJSON *root = fixture_load("loss_option_cases.json");
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        check_case(c);
        n++;
    }
    ck_assert_int_ge(n, 15);
    cJSON_Delete(root);
}
END_TEST

START_TEST(sequence_level_on_policy_is_token_level) {
    /* On policy every ratio is 1 either way, so GSPO and token-level grpo give the same loss and
     * gradient when no row is empty (d ratio_i / d logp = m / L_i: the row's mean). */
    const float logp[] = {-0.5f, -1.0f, -2.0f, -0.1f}, mask[] = {1, 1, 1, 0}, adv[] = {1.5f, -0.5f};
    grpo_loss_inputs in = {logp, NULL, NULL, mask, adv, NULL, 2, 2, NULL};
    grpo_loss_opts o = grpo_loss_opts_default();
    o.type = GRPO_LOSS_GRPO;
    grpo_loss_metrics a, b;
    float da[4], db[4];
    ck_assert_int_eq(grpo_loss_forward(&a, &in, &o, NULL), GRPO_OK);
    ck_assert_int_eq(grpo_loss_backward(da, &in, &o, NULL), GRPO_OK);
    o.is_level = GRPO_IS_SEQUENCE;
    ck_assert_int_eq(grpo_loss_forward(&b, &in, &o, NULL), GRPO_OK);
    ck_assert_int_eq(grpo_loss_backward(db, &in, &o, NULL), GRPO_OK);
    ck_assert(fabs(a.loss - b.loss) < 1e-12);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(da[i] - db[i]) < 1e-7, "%d: %g %g", i, da[i], db[i]);
}
END_TEST

START_TEST(entropy_options_need_entropy) {
    const float logp[] = {-1.0f}, mask[] = {1.0f}, adv[] = {1.0f};
    grpo_loss_inputs in = {logp, NULL, NULL, mask, adv, NULL, 1, 1, NULL};
    grpo_loss_opts o = grpo_loss_opts_default();
    o.num_items_in_batch = 1;
    o.top_entropy_quantile = 0.5;
    grpo_loss_metrics m;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "entropy") != NULL, "%s", err.message);
    o.top_entropy_quantile = 0.0;
    const float ent[] = {1.0f};
    in.entropy = ent;
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "top_entropy_quantile") != NULL, "%s", err.message);
    o.top_entropy_quantile = 1.0;
    o.type = GRPO_LOSS_SAPO;
    o.sapo_temperature_neg = 0.0;
    ck_assert_int_eq(grpo_loss_forward(&m, &in, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "sapo temperatures") != NULL, "%s", err.message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("loss");
    tcase_add_test(tc, one_token_on_policy_by_hand);
    tcase_add_test(tc, kl_by_hand);
    tcase_add_test(tc, bad_inputs_name_the_problem);
    tcase_add_test(tc, truncated_completions_are_masked);
    tcase_add_test(tc, matches_pytorch_autograd);
    tcase_add_test(tc, options_match_pytorch_autograd);
    tcase_add_test(tc, sequence_level_on_policy_is_token_level);
    tcase_add_test(tc, entropy_options_need_entropy);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
