/*
 * test_env.c — multi-turn rollouts (grpo/env.h, core/train/episode.c, the sampler's forced
 * tokens), with the scripted environment of tests/packs/scripted:
 *   - the exact episode: each row is its first observation, then turns of greedy tokens up to the
 *     end-of-turn id, each followed by that member's scripted observation, until the environment
 *     says done. The expected rows are built independently: every turn is a fresh single-turn
 *     greedy run from the whole context so far as a prompt (prefill), every observation is the
 *     tokenizer's encoding of the scripted text. ids, loss mask (1 on drawn tokens only),
 *     lengths and the drawn tokens' log-probs (extended KV cache vs. prefill) must agree;
 *   - the training batch of such a rollout attends to the observation tokens and only the mask
 *     keeps them out of the loss; the episodes' rewards, turns and counts reach the samples'
 *     fields;
 *   - a failing step() is an error naming [env] and the plugin;
 *   - a messages prompt gets each observation through the chat template: the tool message after
 *     the turn, up to the next assistant prompt, without repeating the turn's end token (and
 *     through MiniMind's Qwen-style template from ../shared: the case tagged "shared",
 *     `test_env --shared`, ctest test_env_shared; tests/test_skip.h);
 *   - <tool_call> parsing: calls, several calls, and each kind of malformed call;
 *   - builtin.exec_env with tests/exec_scorers/env_program.c: episodes over JSON lines, and a
 *     crash, a hang (timeout), a line that is not JSON and a reply with a bad key each cost the
 *     episodes of that program (NaN rewards) with one warning naming the program, the request
 *     and the line, never the run.
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_skip.h"
#include "grpo_cli_test.h"
#pragma GCC diagnostic pop
#include <cjson/cJSON.h>

#include "train/episode.h"
#include "train/rollout.h"
#include "train/seqbatch.h"

enum { G = 2, T = 40, MAXC = 256 };

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

typedef struct fixture {
    char tmp[256];
    grpo_run r;
    grpo_model *m;
    grpo_dataset *ds;
    grpo_reward_set rs;
    grpo_episodes E;
    grpo_sampler_opts so;
} fixture;

static char warned[8192]; /* every warning of the test, one per line */

static void counting_log(int32_t level, const char *who, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%d] %s: %s\n", level, who, msg);
    size_t used = strlen(warned);
    if (level == GRPO_LOG_WARN) snprintf(warned + used, sizeof warned - used, "%s\n", msg);
}

/* Replaces the chat template of the model in dir (tokenizer_config.json). */
static void set_template(const char *dir, const char *tpl) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    cJSON *j = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(j);
    cJSON_DeleteItemFromObject(j, "chat_template");
    cJSON_AddStringToObject(j, "chat_template", tpl);
    char *text = cJSON_Print(j);
    fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
    free(text);
    cJSON_Delete(j);
}

/* A run on a tiny random model (chat template tpl when non-NULL) and the arithmetic prompts,
 * [env] = the plugin and keys in env (scripted.echo when NULL) plus extra_env. */
static void fixture_open_tpl(fixture *f, const char *env, const char *extra_env,
                             const char *tpl) {
    memset(f, 0, sizeof *f);
    tiny_model_dir(f->tmp, sizeof f->tmp, "env");
    if (tpl) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/model", f->tmp);
        set_template(dir, tpl);
    }
    char ini[512];
    snprintf(ini, sizeof ini, "%s/run.ini", f->tmp);
    FILE *fp = fopen(ini, "w");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp,
            "[model]\npath = %s/model\n"
            "[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = %d\nmax_completion_length = 8\ntemperature = 0\n"
            "[train]\nthreads = 1\n"
            "[env]\nplugin = %s\nmax_turns = 4\nmax_episode_tokens = %d\n%s"
            "[reward.env]\nplugin = builtin.env\n",
            f->tmp, GRPO_SOURCE_DIR, G, env ? env : "scripted.echo", T, extra_env);
    fclose(fp);
    grpo_error err;
    grpo_error_init(&err);
    grpo_run_args a = {.run_file = ini,
                       .extra_plugin_dirs = {GRPO_PACK_BUILD_DIR, GRPO_BINARY_DIR "/tests/plugins/scripted"},
                       .n_extra = 2};
    ck_ok(grpo_run_open(&f->r, &a, &err), &err);
    ck_assert_int_eq((int)f->r.cfg.env_max_episode_tokens, T);
    ck_ok(grpo_run_open_model(&f->r, f->r.model_dir, 0, &f->m, &err), &err);
    char *path = grpo_run_path(&f->r, f->r.cfg.data_path);
    ck_ok(grpo_run_dataset(&f->r, path, &f->ds, &err), &err);
    free(path);
    ck_ok(grpo_reward_set_create(&f->rs, &f->r.cfg, &f->r.proc.reg, &f->r.proc.host, &err), &err);
    warned[0] = '\0';
    f->r.proc.host.log = counting_log;
    ck_ok(grpo_episodes_open(&f->E, &f->r, &err), &err);
    grpo_sampler_opts so = {{0.0f, 0, 1.0f, 0.0f, 1.0f}, G, T, {0}, 0, f->r.pad_id, 0, NULL,
                            NULL, NULL, 0, 0};
    f->so = so;
}

static void fixture_open_env(fixture *f, const char *env, const char *extra_env) {
    fixture_open_tpl(f, env, extra_env, NULL);
}

static void fixture_open(fixture *f, const char *extra_env) {
    fixture_open_env(f, NULL, extra_env);
}

static void fixture_close(fixture *f) {
    grpo_episodes_close(&f->E);
    grpo_reward_set_free(&f->rs);
    grpo_dataset_free(f->ds);
    grpo_model_close(f->m);
    grpo_run_close(&f->r);
    sh("rm -rf '%s'", f->tmp);
}

/* Appends the tokens of text to ctx[*n]. */
static void put_text(fixture *f, const char *text, int32_t *ctx, int32_t *n) {
    grpo_tok_ids v = {0};
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_tokenizer_encode(f->r.tok, text, strlen(text), 0, &v, &err), &err);
    ck_assert_int_le(*n + (int32_t)v.n, MAXC);
    memcpy(ctx + *n, v.data, v.n * sizeof(int32_t));
    *n += (int32_t)v.n;
    free(v.data);
}

/* One single-turn greedy run with ctx[n] as the prompt (prefill), up to max_new tokens or the
 * end-of-turn id eos. */
static void greedy(fixture *f, const int32_t *ctx, int32_t n, int32_t max_new, int32_t eos,
                   grpo_rollout *out) {
    int32_t *mask = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) mask[i] = 1;
    grpo_sampler_opts o = f->so;
    o.G = 1, o.max_new = max_new, o.eos[0] = eos, o.n_eos = eos >= 0;
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_sampler_run(f->m, &o, ctx, mask, 1, n, &rng, out, &err), &err);
    free(mask);
}

/* The expected episode of member g: ids, mask (1 = drawn), logp of drawn tokens; returns its
 * length. ctx starts as the prompt (p[np]). */
static int32_t expect_episode(fixture *f, const int32_t *p, int32_t np, int g, int32_t eos,
                              int32_t *ids, float *mask, float *logp, int *turns) {
    int32_t ctx[MAXC], n = np, len = 0;
    memcpy(ctx, p, (size_t)np * sizeof(int32_t));
    char obs[64];
    snprintf(obs, sizeof obs, "#%d:", g);
    put_text(f, obs, ctx, &n);
    for (int32_t i = np; i < n; i++) ids[len] = ctx[i], mask[len] = 0, logp[len++] = 0;
    for (*turns = 0; len < T;) {
        grpo_rollout o = {0};
        greedy(f, ctx, n, T - len, eos, &o);
        for (int32_t j = 0; j < o.len[0]; j++) {
            ids[len] = ctx[n++] = o.ids[j], mask[len] = 1, logp[len++] = o.logp[j];
        }
        int ended_turn = !o.truncated[0];
        grpo_rollout_free(&o);
        if (!ended_turn) break; /* out of tokens mid-turn */
        if (++*turns >= 2) break; /* scripted: done after 2 turns */
        int32_t at = n;
        snprintf(obs, sizeof obs, "\n<obs %d %d>\n", g, *turns - 1);
        put_text(f, obs, ctx, &n);
        if (len + (n - at) > T) break; /* the observation does not fit */
        for (int32_t i = at; i < n; i++) ids[len] = ctx[i], mask[len] = 0, logp[len++] = 0;
    }
    return len;
}

/* The end-of-turn id of the tests: member 0's second greedy token after its first observation
 * (first), so that its first turn ends after at most two tokens. */
static int32_t pick_eos_after(fixture *f, const int32_t *p, int32_t np, const char *first) {
    int32_t ctx[MAXC], n = np;
    memcpy(ctx, p, (size_t)np * sizeof(int32_t));
    put_text(f, first, ctx, &n);
    grpo_rollout pre = {0};
    greedy(f, ctx, n, 4, -1, &pre);
    int32_t eos = pre.ids[1];
    grpo_rollout_free(&pre);
    f->so.eos[0] = eos, f->so.n_eos = 1;
    return eos;
}

static int32_t pick_eos(fixture *f, const int32_t *p, int32_t np) {
    return pick_eos_after(f, p, np, "#0:");
}

START_TEST(episode_tokens_and_mask_are_exact) {
    fixture f;
    fixture_open(&f, "");
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout_batch b;
    int keep = 0;
    ck_ok(grpo_rollout_batch_begin(&b, 1, G, &err), &err);
    ck_ok(grpo_rollout_batch_add(&b, &f.r, f.ds, &f.ds->examples[0], &keep, &err), &err);
    ck_assert_int_eq(keep, 1);
    int32_t np = (int32_t)b.n_ids[0], p[MAXC];
    memcpy(p, b.ids[0], (size_t)np * sizeof(int32_t));
    int32_t eos = pick_eos(&f, p, np);

    b.env = &f.E;
    grpo_rng rng;
    grpo_rng_seed(&rng, 5);
    ck_ok(grpo_rollout_batch_run(&b, &f.r, f.m, &f.so, &rng, &f.rs, &err), &err);
    int any_obs_after_turn = 0;
    for (int g = 0; g < G; g++) {
        int32_t ids[MAXC];
        float mask[MAXC], logp[MAXC];
        int turns = 0;
        int32_t len = expect_episode(&f, p, np, g, eos, ids, mask, logp, &turns);
        ck_assert_int_eq(b.roll.len[g], len);
        for (int32_t j = 0; j < len; j++) {
            ck_assert_msg(b.roll.ids[g * T + j] == ids[j], "row %d token %d: %d, expected %d", g,
                          j, b.roll.ids[g * T + j], ids[j]);
            ck_assert_msg(b.roll.mask[g * T + j] == mask[j], "row %d mask %d: %g, expected %g",
                          g, j, b.roll.mask[g * T + j], mask[j]);
            ck_assert_msg(fabsf(b.roll.logp[g * T + j] - logp[j]) < 1e-4f,
                          "row %d logp %d: %g (decode over forced tokens), %g (prefill)", g, j,
                          b.roll.logp[g * T + j], logp[j]);
        }
        for (int32_t j = len; j < T; j++) ck_assert_float_eq(b.roll.mask[g * T + j], 0.0f);
        const grpo_episode *e = &f.E.ep[g];
        ck_assert_int_eq(e->turns, turns);
        any_obs_after_turn |= turns >= 1 && len > turns + 3;
        /* builtin.env scores final (member + 0.5) + 0.25 per step */
        ck_assert_float_eq_tol(b.R[g], (float)g + 0.5f + 0.25f * (float)turns, 1e-6f);
        ck_assert_int_eq(e->done, turns >= 2);
    }
    ck_assert_msg(any_obs_after_turn, "no episode had an observation after a turn: the test "
                  "would not exercise the forced decode");
    /* the training batch attends to every episode token; targets everywhere, loss mask apart */
    grpo_seqbatch sb = {0};
    ck_ok(grpo_seqbatch_from_rollout(&sb, f.r.proc.ops, b.prompt, b.pmask, b.P, G, &b.roll, 0, G,
                                     T, f.r.pad_id, &err),
          &err);
    for (int g = 0; g < G; g++)
        for (int32_t j = 0; j < T; j++) {
            int real = j < b.roll.len[g];
            ck_assert_int_eq(sb.mask[g * (b.P + T) + b.P + j], real);
            ck_assert_int_eq(sb.targets[g * (b.P + T) + b.P - 1 + j],
                             real ? b.roll.ids[g * T + j] : -1);
        }
    grpo_seqbatch_free(&sb);
    grpo_rollout_batch_free(&b);
    fixture_close(&f);
}
END_TEST

START_TEST(episode_fields_reach_rewards) {
    fixture f;
    fixture_open(&f, "");
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout_batch b;
    int keep = 0;
    ck_ok(grpo_rollout_batch_begin(&b, 1, G, &err), &err);
    ck_ok(grpo_rollout_batch_add(&b, &f.r, f.ds, &f.ds->examples[3], &keep, &err), &err);
    b.env = &f.E;
    f.so.eos[0] = f.r.eos[0], f.so.n_eos = 1;
    grpo_rng rng;
    grpo_rng_seed(&rng, 5);
    ck_ok(grpo_rollout_batch_run(&b, &f.r, f.m, &f.so, &rng, &f.rs, &err), &err);
    grpo_field fields[16];
    for (int g = 0; g < G; g++) {
        uint32_t n = grpo_episodes_fields(&f.E, g, fields);
        ck_assert_uint_eq(n, f.ds->examples[3].n_fields + 4);
        ck_assert_str_eq(fields[n - 4].key, "env_reward");
        char want[32];
        snprintf(want, sizeof want, "%.9g", (double)b.R[g]);
        ck_assert_str_eq(fields[n - 4].json, want);
        snprintf(want, sizeof want, "%d", f.E.ep[g].turns);
        ck_assert_str_eq(fields[n - 3].json, want);
        /* the first observation is always there: its tokens are masked */
        ck_assert_float_eq(b.roll.mask[g * T], 0.0f);
        ck_assert_ptr_nonnull(strstr(b.completion[g], g ? "#1:" : "#0:"));
    }
    grpo_rollout_batch_free(&b);
    fixture_close(&f);
}
END_TEST

START_TEST(failing_step_names_env_and_plugin) {
    fixture f;
    fixture_open(&f, "fail_step = 0\n");
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout_batch b;
    int keep = 0;
    ck_ok(grpo_rollout_batch_begin(&b, 1, G, &err), &err);
    ck_ok(grpo_rollout_batch_add(&b, &f.r, f.ds, &f.ds->examples[0], &keep, &err), &err);
    b.env = &f.E;
    pick_eos(&f, b.ids[0], (int32_t)b.n_ids[0]); /* member 0's first turn reaches step() */
    grpo_rng rng;
    grpo_rng_seed(&rng, 5);
    int rc = grpo_rollout_batch_run(&b, &f.r, f.m, &f.so, &rng, &f.rs, &err);
    ck_assert_int_ne(rc, GRPO_OK);
    ck_assert_msg(strstr(err.message, "[env] (plugin scripted.echo) failed to step"), "%s",
                  err.message);
    ck_assert_msg(strstr(err.message, "scripted failure at turn 0"), "%s", err.message);
    grpo_rollout_batch_free(&b);
    fixture_close(&f);
}
END_TEST

/* The forced tokens after a turn ending in ids[n], decoded with special tokens kept. */
static char *observation_after(fixture *f, const grpo_example *ex, const char *turn) {
    grpo_error err;
    grpo_error_init(&err);
    char *prompt[1] = {(char *)"p"};
    const grpo_example *exs[1] = {ex};
    ck_ok(grpo_episodes_begin(&f->E, prompt, exs, 1, 1, &err), &err);
    int32_t ids[MAXC], n = 0;
    put_text(f, turn, ids, &n);
    const grpo_sampler_turns *t = grpo_episodes_turns(&f->E);
    const int32_t *obs = NULL;
    int32_t n_obs = 0;
    int done = 1;
    ck_ok(t->turn_end(t->user, 0, ids, n, 1000, &obs, &n_obs, &done, &err), &err);
    ck_assert_int_eq(done, 0);
    grpo_tok_text text = {0};
    ck_ok(grpo_tokenizer_decode(f->r.tok, obs, (size_t)n_obs, 0, &text, &err), &err);
    ck_ok(grpo_episodes_finish(&f->E, &err), &err);
    return text.data;
}

START_TEST(observation_goes_through_the_chat_template) {
    fixture f;
    fixture_open(&f, "");
    grpo_message msg[1] = {{sizeof(grpo_message), "user", "2+2?"}};
    grpo_example chat = {.messages = msg, .n_messages = 1}, plain = {.prompt = "2+2="};
    /* ChatML (the tiny model's template): the turn's <|im_end|> is the policy's own */
    char *o = observation_after(&f, &chat, "calc: 2+2<|im_end|>");
    ck_assert_str_eq(o, "\n<|im_start|>tool\n\n<obs 0 0>\n<|im_end|>\n<|im_start|>assistant\n");
    free(o);
    /* a turn ended by another token keeps the template's end of the assistant message */
    o = observation_after(&f, &chat, "calc: 2+2<|endoftext|>");
    ck_assert_str_eq(o, "<|im_end|>\n<|im_start|>tool\n\n<obs 0 0>\n<|im_end|>\n"
                        "<|im_start|>assistant\n");
    free(o);
    /* a plain-text prompt gets the observation as the environment wrote it */
    o = observation_after(&f, &plain, "calc: 2+2<|im_end|>");
    ck_assert_str_eq(o, "\n<obs 0 0>\n");
    free(o);
    fixture_close(&f);
}
END_TEST

/* MiniMind's Qwen-style template (shared data, tagged "shared"): a tool message is a user turn
 * holding <tool_response>, then the next assistant prompt. */
START_TEST(observation_through_a_qwen_style_template) {
    char src[4096];
    snprintf(src, sizeof src, "%s/data/minimind3/tokenizer_config.json", test_shared_dir());
    FILE *fp = fopen(src, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", src);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    cJSON *j = cJSON_Parse(buf);
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    ck_assert(cJSON_IsString(tpl));
    fixture f;
    fixture_open_tpl(&f, NULL, "", tpl->valuestring);
    cJSON_Delete(j);
    grpo_message msg[1] = {{sizeof(grpo_message), "user", "2*3?"}};
    grpo_example chat = {.messages = msg, .n_messages = 1};
    char *o = observation_after(&f, &chat, "calc: 2*3<|im_end|>");
    const char *want = "\n<|im_start|>user\n<tool_response>\n\n<obs 0 0>\n\n</tool_response>"
                       "<|im_end|>\n<|im_start|>assistant\n";
    ck_assert_msg(!strncmp(o, want, strlen(want)), "got '%s'", o);
    free(o);
    fixture_close(&f);
}
END_TEST

/* env.tools reaches the template's tools variable, for the prompt and the observations. */
START_TEST(tools_reach_the_chat_template) {
    static const char tpl[] =
        "{% if tools %}<|im_start|>system\nTOOLS {{ tools | tojson }}<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    char tools[512], extra[600];
    snprintf(tools, sizeof tools, "/tmp/grpo_test_env_tools_%d.json", (int)getpid());
    FILE *fp = fopen(tools, "w");
    ck_assert_ptr_nonnull(fp);
    fputs("[{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]\n", fp);
    fclose(fp);
    snprintf(extra, sizeof extra, "tools = %s\n", tools);
    fixture f;
    fixture_open_tpl(&f, NULL, extra, tpl);
    ck_assert_str_eq(f.r.tools_json, "[{\"type\":\"function\",\"function\":{\"name\":\"calc\"}}]");
    grpo_message msg[1] = {{sizeof(grpo_message), "user", "2+2?"}};
    grpo_example chat = {.messages = msg, .n_messages = 1};
    grpo_dataset ds = {.path = (char *)"mem"};
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int keep = 0;
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_run_prompt(&f.r, &ds, &chat, &text, &ids, &n, &keep, &err), &err);
    ck_assert_str_eq(text, "<|im_start|>system\nTOOLS [{\"type\": \"function\", \"function\": "
                           "{\"name\": \"calc\"}}]<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(text), free(ids);
    char *o = observation_after(&f, &chat, "<tool_call>{\"name\": \"calc\"}</tool_call><|im_end|>");
    ck_assert_str_eq(o, "\n<|im_start|>tool\n\n<obs 0 0>\n<|im_end|>\n<|im_start|>assistant\n");
    free(o);
    ck_assert_int_eq(f.E.ep[0].tool_calls, 1); /* the host parsed the call */
    fixture_close(&f);
    remove(tools);
}
END_TEST

START_TEST(tool_calls_parse) {
    char *calls = NULL, *why = NULL;
    int32_t n = -1;
    grpo_parse_tool_calls("no call here", &calls, &n, &why);
    ck_assert_ptr_null(calls);
    ck_assert_ptr_null(why);
    ck_assert_int_eq(n, 0);
    grpo_parse_tool_calls("a <tool_call>{\"name\": \"calc\", \"arguments\": {\"expression\": "
                          "\"2*3\"}}</tool_call> b <tool_call>{\"name\":\"x\"}</tool_call>",
                          &calls, &n, &why);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_null(why);
    ck_assert_str_eq(calls, "[{\"name\":\"calc\",\"arguments\":{\"expression\":\"2*3\"}},"
                            "{\"name\":\"x\"}]");
    free(calls);
    grpo_parse_tool_calls("<tool_call>{\"name\": calc}</tool_call>", &calls, &n, &why);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(calls);
    ck_assert_msg(why && strstr(why, "tool call 1 is not JSON"), "%s", why ? why : "(none)");
    free(why);
    grpo_parse_tool_calls("<tool_call>{\"name\":\"a\"}</tool_call><tool_call>[1]</tool_call>",
                          &calls, &n, &why);
    ck_assert_int_eq(n, 1);
    ck_assert_msg(why && strstr(why, "tool call 2 has no string \"name\""), "%s",
                  why ? why : "(none)");
    free(calls), free(why);
    grpo_parse_tool_calls("<tool_call>{\"name\":\"a\"}", &calls, &n, &why);
    ck_assert_int_eq(n, 0);
    ck_assert_msg(why && strstr(why, "tool call 1 has no </tool_call>"), "%s",
                  why ? why : "(none)");
    free(calls), free(why);
}
END_TEST

/* One rollout of B = 1, G = 2 episodes with the test program in mode; member 0's first turn
 * ends after at most two tokens. R: builtin.env's score of each row. */
static void exec_rollout(fixture *f, const char *mode, float *R) {
    char env[1024];
    snprintf(env, sizeof env, "builtin.exec_env\ncommand = %s\ncommand = %s\ntimeout = 1",
             EXEC_ENV_PROGRAM, mode);
    fixture_open_env(f, env, "");
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout_batch b;
    int keep = 0;
    ck_ok(grpo_rollout_batch_begin(&b, 1, G, &err), &err);
    ck_ok(grpo_rollout_batch_add(&b, &f->r, f->ds, &f->ds->examples[0], &keep, &err), &err);
    b.env = &f->E;
    pick_eos_after(f, b.ids[0], (int32_t)b.n_ids[0], "[0]"); /* episode 0's first observation */
    grpo_rng rng;
    grpo_rng_seed(&rng, 5);
    ck_ok(grpo_rollout_batch_run(&b, &f->r, f->m, &f->so, &rng, &f->rs, &err), &err);
    for (int g = 0; g < G; g++) R[g] = b.R[g];
    ck_assert_ptr_nonnull(strstr(b.completion[0], "[0]"));
    ck_assert_ptr_nonnull(strstr(b.completion[1], "[1]"));
    ck_assert_int_ge(f->E.ep[0].turns, 1);
    grpo_rollout_batch_free(&b);
}

START_TEST(exec_env_program_episodes) {
    fixture f;
    float R[G];
    exec_rollout(&f, "good", R);
    for (int g = 0; g < G; g++) {
        const grpo_episode *e = &f.E.ep[g];
        /* final member + 1, step rewards 0 (turn 0) and 0.25 (turn 1, done) */
        ck_assert_float_eq_tol(R[g], (float)g + 1.0f + (e->turns >= 2 ? 0.25f : 0.0f), 1e-6f);
        ck_assert_int_eq(e->tool_calls, e->turns); /* the program counts one call per step */
        ck_assert_int_eq(e->done, e->turns >= 2);
    }
    ck_assert_msg(warned[0] == '\0', "warnings: %s", warned);
    fixture_close(&f);
}
END_TEST

START_TEST(exec_env_program_failures) {
    static const char *const modes[][3] = {
        {"crash", "exited or closed its output", NULL},
        {"hang", "no reply within 1 s (timeout)", NULL},
        {"junk", "malformed reply to request", "line: 'this is not json'"},
        {"badkey", "malformed reply to request", "\"done\":\"yes\""},
    };
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        fixture f;
        float R[G];
        exec_rollout(&f, modes[k][0], R);
        ck_assert_msg(isnan(R[0]), "%s: reward %g, expected NaN", modes[k][0], R[0]);
        ck_assert_msg(strstr(warned, "env_program") && strstr(warned, modes[k][1]) &&
                          (!modes[k][2] || strstr(warned, modes[k][2])) &&
                          strstr(warned, "ends without a reward"),
                      "%s: warnings: %s", modes[k][0], warned);
        fixture_close(&f);
    }
}
END_TEST

/* A program that never answers used to make every episode wait its whole timeout, for ever: the
 * third exchange in a row past the deadline ends the run, naming the program (the first rollout
 * loses two episodes to two timeouts and goes on; the second's first reset is the third). */
START_TEST(exec_env_that_never_answers_ends_the_run) {
    fixture f;
    char env[1024];
    snprintf(env, sizeof env, "builtin.exec_env\ncommand = %s\ncommand = mute\ntimeout = 0.3",
             EXEC_ENV_PROGRAM);
    fixture_open_env(&f, env, "");
    grpo_error err;
    grpo_error_init(&err);
    int rc = GRPO_OK;
    for (int round = 0; round < 2 && rc == GRPO_OK; round++) {
        grpo_rollout_batch b;
        int keep = 0;
        ck_ok(grpo_rollout_batch_begin(&b, 1, G, &err), &err);
        ck_ok(grpo_rollout_batch_add(&b, &f.r, f.ds, &f.ds->examples[0], &keep, &err), &err);
        b.env = &f.E;
        grpo_rng rng;
        grpo_rng_seed(&rng, 5);
        rc = grpo_rollout_batch_run(&b, &f.r, f.m, &f.so, &rng, &f.rs, &err);
        ck_assert_msg(round == 1 || rc == GRPO_OK, "round 0 failed: %s", err.message);
        grpo_rollout_batch_free(&b);
    }
    ck_assert_int_ne(rc, GRPO_OK);
    ck_assert_msg(strstr(err.message, "env_program") &&
                      strstr(err.message, "gave no reply within timeout = 0.3 s 3 times in a row"),
                  "%s", err.message);
    fixture_close(&f);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, episode_tokens_and_mask_are_exact);
    tcase_add_test(tc, episode_fields_reach_rewards);
    tcase_add_test(tc, failing_step_names_env_and_plugin);
    tcase_add_test(tc, tool_calls_parse);
    tcase_add_test(tc, observation_goes_through_the_chat_template);
    tcase_add_test(tc, tools_reach_the_chat_template);
    tcase_add_test(tc, exec_env_program_episodes);
    tcase_add_test(tc, exec_env_that_never_answers_ends_the_run);
    tcase_add_test(tc, exec_env_program_failures);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("shared"); /* ../shared's MiniMind template */
    tcase_set_tags(ts, "shared");
    tcase_set_timeout(ts, 300);
    tcase_add_test(ts, observation_through_a_qwen_style_template);
    suite_add_tcase(s, ts);
    return s;
}

int main(int argc, char **argv) {
    test_tags tags = test_shared_tags(argc, argv, "data/minimind3/tokenizer_config.json");
    SRunner *sr = srunner_create(suite());
    srunner_run_tagged(sr, NULL, NULL, tags.include, tags.exclude, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
