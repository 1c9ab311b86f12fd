/*
 * cmd_reward.c — `grpo reward score --config RUN.ini --input SAMPLES.jsonl`: scores completions with
 * the run file's rewards, without training. How a pack author tests a pack.
 *
 * Input lines: {"prompt": "..." | [{"role","content"},...], "completion": "...",
 *               "group": G?, "member": M?, ...other fields passed to rewards}
 * Output lines: {"line": L, "rewards": {"NAME": value|null, ...}, "total": weighted sum|null}
 *
 * Consecutive lines of one group are scored as one batch (a reward may compare a group's members),
 * and each batch's lines are written and flushed before the next is scored: a plugin that crashes
 * loses nothing already scored. With a model in the run file (model.path) its tokenizer fills
 * completion_ids (the completion encoded without special tokens) as training does.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run_tokenizer.h"
#include "config/run_config.h"
#include "host/process.h"
#include "train/reward_batch.h"
#include "train/reward_sum.h"
#include "train/rewards.h"
#include "train/run.h" /* grpo_run_args: --config, --plugin-path and --set */


/* One input line, owned: what its sample (reward_batch.h) points at. */
typedef struct score_line {
    cJSON *json;
    grpo_example ex;     /* messages (a message-list prompt) and the other keys as fields */
    const char *prompt;  /* the prompt string, "" for a message list or none */
    const char *completion;
    uint32_t group, member;
    grpo_message *messages;
    grpo_field *fields;
    char **field_text;
    uint32_t n_fields;
    int lineno;
    grpo_tok_ids ids; /* the completion's tokens (with a tokenizer), else empty */
} score_line;

static void score_line_free(score_line *l) {
    for (uint32_t i = 0; i < l->n_fields; i++) free(l->field_text[i]);
    free(l->field_text);
    free(l->fields);
    free(l->messages);
    grpo_tok_ids_free(&l->ids);
    cJSON_Delete(l->json);
}

/* Fills l's sample parts from its parsed JSON; returns NULL or what was expected. */
static const char *score_line_parse(score_line *l, uint32_t index) {
    const cJSON *j = l->json, *prompt = cJSON_GetObjectItemCaseSensitive(j, "prompt");
    const cJSON *completion = cJSON_GetObjectItemCaseSensitive(j, "completion");
    const cJSON *group = cJSON_GetObjectItemCaseSensitive(j, "group");
    const cJSON *member = cJSON_GetObjectItemCaseSensitive(j, "member");
    if (!cJSON_IsObject(j)) return "a JSON object";
    if (!cJSON_IsString(completion)) return "a string \"completion\"";
    if (prompt && !cJSON_IsString(prompt) && !cJSON_IsArray(prompt))
        return "\"prompt\" as a string or a list of {\"role\", \"content\"} messages";
    l->completion = completion->valuestring;
    l->prompt = cJSON_IsString(prompt) ? prompt->valuestring : "";
    l->group = cJSON_IsNumber(group) ? (uint32_t)group->valueint : index;
    l->member = cJSON_IsNumber(member) ? (uint32_t)member->valueint : 0;
    if (cJSON_IsArray(prompt)) {
        uint32_t n = (uint32_t)cJSON_GetArraySize(prompt), i = 0;
        l->messages = calloc(n ? n : 1, sizeof *l->messages);
        const cJSON *m;
        cJSON_ArrayForEach(m, prompt) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsString(role) || !cJSON_IsString(content))
                return "each prompt message as {\"role\": string, \"content\": string}";
            l->messages[i++] = (grpo_message){sizeof(grpo_message), role->valuestring, content->valuestring};
        }
        l->ex.messages = l->messages, l->ex.n_messages = n;
    }
    uint32_t n = (uint32_t)cJSON_GetArraySize(j);
    l->fields = calloc(n, sizeof *l->fields);
    l->field_text = calloc(n, sizeof *l->field_text);
    const cJSON *f;
    cJSON_ArrayForEach(f, j) {
        if (!strcmp(f->string, "prompt") || !strcmp(f->string, "completion") ||
            !strcmp(f->string, "group") || !strcmp(f->string, "member"))
            continue;
        char *text = cJSON_PrintUnformatted(f);
        l->field_text[l->n_fields] = text;
        l->fields[l->n_fields++] = (grpo_field){sizeof(grpo_field), f->string, text};
    }
    l->ex.fields = l->fields, l->ex.n_fields = l->n_fields;
    return NULL;
}

static void print_double(double v) {
    if (isnan(v)) fputs("null", stdout);
    else printf("%.9g", v);
}

static void print_scores(const grpo_reward_set *set, const score_line *lines, uint32_t n,
                         const float *R, const float *total) {
    for (uint32_t i = 0; i < n; i++) {
        printf("{\"line\": %d, \"rewards\": {", lines[i].lineno);
        for (int k = 0; k < set->n; k++) {
            printf("%s\"%s\": ", k ? ", " : "", set->specs[k]->name);
            print_double(R[(size_t)i * set->n + k]);
        }
        fputs("}, \"total\": ", stdout);
        print_double(total[i]);
        fputs("}\n", stdout);
    }
}

/* Reads every line of path into lines; returns 0, or 1 after printing file:line. */
static int read_samples(const char *path, score_line **lines_out, uint32_t *n_out) {
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "grpo reward score: %s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    score_line *lines = NULL;
    uint32_t n = 0, cap = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    int lineno = 0, bad = 0;
    while (!bad && getline(&buf, &bufcap, f) > 0) {
        lineno++;
        if (strspn(buf, " \t\r\n") == strlen(buf)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            lines = realloc(lines, cap * sizeof *lines);
        }
        lines[n] = (score_line){.json = cJSON_Parse(buf), .lineno = lineno};
        const char *expected = lines[n].json ? score_line_parse(&lines[n], n) : "valid JSON";
        if (expected) {
            fprintf(stderr, "grpo reward score: %s:%d: expected %s\n", path, lineno, expected);
            bad = 1;
        }
        n++;
    }
    free(buf);
    fclose(f);
    *lines_out = lines, *n_out = n;
    return bad;
}

/* Encodes each line's completion with tok (no special tokens: training's ids are the sampled
 * tokens, which never include a BOS); 0, or 1 after printing file:line. */
static int lines_tokenize(const grpo_tokenizer *tok, const char *path, score_line *lines,
                          uint32_t n) {
    for (uint32_t i = 0; tok && i < n; i++) {
        grpo_error err;
        grpo_error_init(&err);
        if (grpo_tokenizer_encode(tok, lines[i].completion, strlen(lines[i].completion), 0,
                                  &lines[i].ids, &err) != GRPO_OK) {
            fprintf(stderr, "grpo reward score: %s:%d: cannot tokenize the completion: %s\n", path,
                    lines[i].lineno, err.message);
            return 1;
        }
    }
    return 0;
}

/* The samples of the n lines, with their token ids when tokenized. */
static int lines_batch(grpo_reward_batch *b, const score_line *lines, uint32_t n, grpo_error *err) {
    if (grpo_reward_batch_init(b, n, err) != GRPO_OK) return err->status;
    for (uint32_t i = 0; i < n; i++)
        grpo_reward_batch_set(b, i, lines[i].prompt, &lines[i].ex, lines[i].completion,
                              lines[i].ids.data, (uint32_t)lines[i].ids.n, lines[i].group,
                              lines[i].member, 0);
    return GRPO_OK;
}

/* Scores lines (n) as one batch and writes their results, flushed; 0, or 1 after printing why. */
static int score_batch(grpo_reward_set *set, const score_line *lines, uint32_t n, const float *w,
                       float *R, float *total) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_reward_batch batch = {0};
    int rc = lines_batch(&batch, lines, n, &err);
    if (rc == GRPO_OK) rc = grpo_reward_set_score(set, batch.samples, n, R, &err);
    grpo_reward_batch_free(&batch);
    if (rc != GRPO_OK) {
        fprintf(stderr, "grpo reward score: %s\n", err.message);
        return 1;
    }
    grpo_reward_sum(total, R, w, (int)n, set->n);
    print_scores(set, lines, n, R, total);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "grpo reward score: cannot write the scores: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* Scores every run of consecutive lines of one group as a batch, in file order. */
static int score_lines(grpo_reward_set *set, const score_line *lines, uint32_t n) {
    float *R = calloc((size_t)set->n * n + 1, sizeof *R);
    float *total = calloc((size_t)n + 1, sizeof *total), *w = calloc((size_t)set->n + 1, sizeof *w);
    int rc = !R || !total || !w;
    if (rc) fprintf(stderr, "grpo reward score: out of memory for %u samples\n", n);
    else grpo_reward_set_weights(set, w);
    long batch = 0;
    for (uint32_t i = 0, end; rc == 0 && i < n; i = end) {
        for (end = i + 1; end < n && lines[end].group == lines[i].group;) end++;
        grpo_plugin_call_progress(0, ++batch); /* a crash report names the batch */
        rc = score_batch(set, lines + i, end - i, w, R, total);
    }
    free(R), free(total), free(w);
    return rc;
}

/* The tokenizer of the run file's model (model.path) into host, or NULL: none named, or a
 * warning says why it could not be loaded (completion_ids then stay empty). */
static grpo_tokenizer *model_tokenizer(const grpo_run_config *cfg, const char *config,
                                       grpo_host *host) {
    grpo_tokenizer *tok = NULL;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_cli_run_tokenizer(cfg, host, &tok, &err) != GRPO_OK)
        fprintf(stderr, "warning: %s: model.path %s: no tokenizer (%s); completion_ids are empty, "
                "so rewards that count tokens see none\n", config, cfg->model_path, err.message);
    return tok;
}

static int reward_score_usage(FILE *f) {
    fputs("usage: grpo reward score --config RUN.ini --input SAMPLES.jsonl\n"
          "                         [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
          "  scores each {\"prompt\", \"completion\", ...fields} line with the run file's [reward.*]\n"
          "  sections and prints {\"line\", \"rewards\": {NAME: value}, \"total\"} per line.\n"
          "  Consecutive lines with the same \"group\" (default: each line its own) are scored as\n"
          "  one batch, printed and flushed before the next. With model.path in the run file, its\n"
          "  tokenizer fills completion_ids as in training.\n", f);
    return f == stdout ? 0 : 2;
}

/* a->run_file is the run file (--config); its --plugin-path dirs and --set overrides. */
static int reward_score(const grpo_run_args *a, const char *input) {
    const char *config = a->run_file;
    grpo_error err;
    grpo_error_init(&err);
    grpo_process proc; /* reward models load with this command's plugin path and backend */
    grpo_run_config cfg = {0};
    grpo_reward_set set = {0};
    score_line *lines = NULL;
    grpo_tokenizer *tok = NULL;
    uint32_t n = 0;
    int rc = 1;
    if (grpo_process_open(&proc, a->extra_plugin_dirs, a->n_extra, NULL, 0, &err) != GRPO_OK ||
        grpo_run_config_load_set(&cfg, config, a->sets, a->n_sets, &proc.reg, 0, NULL, &err) !=
            GRPO_OK ||
        grpo_process_backend(&proc, "cpu", (int32_t)cfg.train_threads, GRPO_DTYPE_F32, &err) != GRPO_OK)
        fprintf(stderr, "grpo reward score: %s\n", err.message);
    else if (cfg.n_rewards == 0)
        fprintf(stderr, "grpo reward score: %s: no [reward.NAME] section; expected at least one\n", config);
    else {
        tok = model_tokenizer(&cfg, config, &proc.host); /* what training hands the rewards too */
        if (grpo_reward_set_create(&set, &cfg, &proc.reg, &proc.host, &err) != GRPO_OK)
            fprintf(stderr, "grpo reward score: %s: %s\n", config, err.message);
        else if (read_samples(input, &lines, &n) == 0 && lines_tokenize(tok, input, lines, n) == 0)
            rc = score_lines(&set, lines, n);
    }
    for (uint32_t i = 0; i < n; i++) score_line_free(&lines[i]);
    free(lines);
    grpo_reward_set_free(&set);
    grpo_tokenizer_free(tok);
    grpo_run_config_free(&cfg);
    grpo_process_close(&proc);
    return rc;
}

int cmd_reward(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "score")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return reward_score_usage(stdout);
        return reward_score_usage(stderr);
    }
    grpo_run_args a = {0};
    const char *input = NULL;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return reward_score_usage(stdout);
        if (!strcmp(argv[i], "--config") && v) a.run_file = argv[++i];
        else if (!strcmp(argv[i], "--input") && v) input = argv[++i];
        else if (!strcmp(argv[i], "--plugin-path") && v && a.n_extra < 16)
            a.extra_plugin_dirs[a.n_extra++] = argv[++i];
        else if (!strcmp(argv[i], "--set") && v && a.n_sets < GRPO_RUN_MAX_SETS)
            a.sets[a.n_sets++] = argv[++i];
        else {
            fprintf(stderr, "grpo reward score: unexpected argument '%s'\n", argv[i]);
            return reward_score_usage(stderr);
        }
    }
    if (!a.run_file || !input) return reward_score_usage(stderr);
    return reward_score(&a, input);
}
