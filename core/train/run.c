/* run.c — the setup train, sft and eval share (see run.h). */
#include "train/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/files.h"
#include "host/host.h"
#include "host/host_model.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* data.chat_template's "{prompt}" is the user message: rewrite it to the simple format's {user}. */
/* Where the model's chat template was read from, for its error messages (the tokenizer's
 * precedence: chat_template.jinja, then tokenizer_config.json's "chat_template"). malloc'd. */
static char *chat_template_source(const char *dir) {
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (stat(path, &sb) != 0) snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    return dup_str(path);
}

static char *simple_format(const char *f) {
    size_t n = strlen(f), k = 0;
    char *out = malloc(2 * n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        if (!strncmp(f + i, "{prompt}", 8))
            memcpy(out + k, "{user}", 6), k += 6, i += 8;
        else
            out[k++] = f[i++];
    }
    out[k] = 0;
    return out;
}

/* EOS ids: the tokenizer's eos token, and <|im_end|> / <|endoftext|> when the vocab has them. */
static void find_eos(grpo_run *r) {
    const char *names[] = {"<|im_end|>", "<|endoftext|>"};
    int32_t e = grpo_tokenizer_eos_id(r->tok);
    if (e >= 0) r->eos[r->n_eos++] = e;
    for (int i = 0; i < 2; i++) {
        int32_t id = grpo_tokenizer_token_to_id(r->tok, names[i]);
        int dup = 0;
        for (int j = 0; j < r->n_eos; j++) dup |= r->eos[j] == id;
        if (id >= 0 && !dup) r->eos[r->n_eos++] = id;
    }
    r->pad_id = grpo_tokenizer_pad_id(r->tok);
    if (r->pad_id < 0) r->pad_id = r->n_eos ? r->eos[0] : 0;
}

/* env.tools: the file's JSON list of tool schemas, for the chat template's tools variable. */
static int load_tools(grpo_run *r, grpo_error *err) {
    char *path = grpo_run_path(r, r->cfg.env_tools), *text = NULL;
    size_t len = 0;
    int rc = path ? grpo_read_file(path, &text, &len, err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    cJSON *j = rc == GRPO_OK ? cJSON_ParseWithLength(text, len) : NULL;
    if (rc == GRPO_OK && !cJSON_IsArray(j))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "env.tools: %s is not a JSON list; expected "
                            "[{\"type\": \"function\", \"function\": {\"name\": ...}}, ...]",
                            path);
    if (rc == GRPO_OK && !(r->tools_json = cJSON_PrintUnformatted(j)))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    cJSON_Delete(j);
    free(path), free(text);
    return rc;
}

/* The run's backend ([model] backend) at its precision ([model] dtype); a reward plugin's model
 * (reward_model.score) runs on it too, with the run's threads and packs. */
static int open_backend(grpo_run *r, const char *run_file, grpo_error *err) {
    int dtype = r->cfg.model_dtype, backend = r->cfg.model_backend;
    if (dtype == GRPO_CFG_DTYPE_F16)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: model.dtype = f16 is not implemented (f32, or bf16 with "
                              "model.backend = cuda)", run_file);
    if (dtype == GRPO_CFG_DTYPE_BF16 && backend == GRPO_BACKEND_CPU)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: model.dtype = bf16 needs model.backend = cuda (or auto on a "
                              "GPU machine); the cpu backend computes in f32", run_file);
    int rc = grpo_process_backend(&r->proc, grpo_choices_backend[backend],
                              (int32_t)r->cfg.train_threads,
                              dtype == GRPO_CFG_DTYPE_BF16 ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32, err);
    if (rc != GRPO_OK) { /* say which key chose it */
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        grpo_error_set(err, rc, "%s: model.backend = %s: %s", run_file,
                       grpo_choices_backend[backend], why);
    }
    return rc;
}

int grpo_run_open(grpo_run *r, const grpo_run_args *a, grpo_error *err) {
    memset(r, 0, sizeof *r);
    int rc = grpo_process_open(&r->proc, a->extra_plugin_dirs, a->n_extra, NULL, 0, err);
    if (rc != GRPO_OK) return rc;
    unsigned flags = a->training && !a->model_dir ? GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS : 0;
    grpo_diag diag = {0};
    rc = grpo_run_config_load_set(&r->cfg, a->run_file, a->sets, a->n_sets, &r->proc.reg, flags,
                                  &diag, err);
    if (rc != GRPO_OK && diag.n > 1) { /* every problem once, then err says how many */
        for (int i = 0; i < diag.n; i++) fprintf(stderr, "%s\n", diag.msg[i]);
        grpo_error_set(err, rc, "%s: %d problems (above)", a->run_file, diag.n);
    }
    if (rc != GRPO_OK) { /* one problem: err holds it */
        grpo_diag_free(&diag);
        return rc;
    }
    grpo_diag_free(&diag);
    if (a->training && r->cfg.n_rewards == 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: no [reward.NAME] section; a GRPO run needs at least one reward",
                              a->run_file);
    r->model_dir = a->model_dir ? dup_str(a->model_dir) : grpo_run_path(r, r->cfg.model_path);
    if (!r->model_dir || !r->model_dir[0])
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: [model] path is not set (or give --model DIR)", a->run_file);
    if ((rc = open_backend(r, a->run_file, err)) != GRPO_OK) return rc;
    if ((rc = grpo_tokenizer_load(r->model_dir, &r->tok, err)) != GRPO_OK) return rc;
    grpo_host_set_tokenizer(&r->proc.host, r->tok);
    const char *t = grpo_tokenizer_chat_template(r->tok);
    char *where = t ? chat_template_source(r->model_dir) : NULL;
    rc = t && !where ? grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory")
                     : grpo_chat_template_compile(t ? t : grpo_chat_template_chatml(),
                                                  t ? where : "ChatML", &r->tpl, err);
    free(where);
    if (rc != GRPO_OK) return rc;
    if (r->cfg.data_chat_template[0] &&
        !(r->simple_format = simple_format(r->cfg.data_chat_template)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    if (r->cfg.env_tools[0] && (rc = load_tools(r, err)) != GRPO_OK) return rc;
    find_eos(r);
    return GRPO_OK;
}

void grpo_run_close(grpo_run *r) {
    grpo_process_close(&r->proc); /* after the rewards whose models it holds */
    grpo_chat_template_free(r->tpl);
    grpo_tokenizer_free(r->tok);
    free(r->model_dir), free(r->simple_format), free(r->tools_json);
    grpo_run_config_free(&r->cfg);
    memset(r, 0, sizeof *r);
}

int grpo_run_open_model(grpo_run *r, const char *dir, int trainable, grpo_model **out,
                        grpo_error *err) {
    return grpo_run_open_model_as(r, dir, trainable, GRPO_DTYPE_F32, out, err);
}

int grpo_run_open_model_as(grpo_run *r, const char *dir, int trainable, int32_t weight_dtype,
                           grpo_model **out, grpo_error *err) {
    int rc = grpo_model_open_dir_as(out, &r->proc.reg, &r->proc.host, dir, trainable, weight_dtype,
                                    err);
    if (rc != GRPO_OK) return rc;
    int32_t tv = grpo_tokenizer_vocab_size(r->tok), mv = grpo_model_vocab(*out);
    if (tv > mv) {
        grpo_model_close(*out);
        *out = NULL;
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: the tokenizer (%s/tokenizer.json) has ids up to %d but the "
                              "model's embedding has %d rows; expected vocab_size >= %d",
                              dir, r->model_dir, tv - 1, mv, tv);
    }
    return GRPO_OK;
}

int grpo_run_compute_bf16(const grpo_run *r, grpo_model *m, const char *key, grpo_error *err) {
    grpo_error inner;
    grpo_error_init(&inner);
    int rc = grpo_model_set_compute(m, GRPO_DTYPE_BF16, &inner);
    return rc == GRPO_OK ? GRPO_OK
                         : grpo_error_set(err, rc, "%s: %s = bf16: %s", r->cfg.path, key,
                                          inner.message);
}

int grpo_run_check_bf16(const grpo_run *r, grpo_model *m, const char *key, grpo_error *err) {
    int rc = grpo_run_compute_bf16(r, m, key, err);
    return rc == GRPO_OK ? grpo_model_set_compute(m, GRPO_DTYPE_F32, err) : rc;
}

char *grpo_run_path(const grpo_run *r, const char *value) {
    return grpo_run_config_input_path(&r->cfg, value);
}

int grpo_run_dataset(grpo_run *r, const char *path, grpo_dataset **out, grpo_error *err) {
    grpo_dataset_options o = {.skip_bad_lines = r->cfg.data_bad_lines == GRPO_BAD_LINES_SKIP,
                              .prompt_field = r->cfg.data_prompt_field};
    int rc = grpo_dataset_load(path, &o, out, err);
    if (rc == GRPO_OK && (*out)->n_skipped)
        fprintf(stderr, "warning: %s: skipped %zu bad lines; first: %s\n", path, (*out)->n_skipped,
                (*out)->first_skip);
    return rc;
}

static int render(void *user, const grpo_message *messages, size_t n, char **out, grpo_error *err) {
    grpo_run *r = user;
    if (r->simple_format) return grpo_chat_format_simple(r->simple_format, messages, n, out, err);
    grpo_chat_options o = {1, NULL, NULL, r->tools_json, NULL, 0};
    return grpo_chat_template_render(r->tpl, messages, n, &o, out, err);
}

/* The tokenizer callback of grpo_run_prompt; remembers the length before truncation. */
typedef struct prompt_tok {
    const grpo_run *r;
    size_t full;
} prompt_tok;

static int tokenize(void *user, const char *text, int32_t **ids, size_t *n, grpo_error *err) {
    prompt_tok *pt = user;
    grpo_tok_ids v = {0};
    int rc = grpo_tokenizer_encode(pt->r->tok, text, strlen(text), 0, &v, err);
    if (rc != GRPO_OK) return rc;
    *ids = v.data, *n = pt->full = v.n;
    return GRPO_OK;
}

int grpo_run_prompt(grpo_run *r, const grpo_dataset *ds, const grpo_example *ex, char **text,
                    int32_t **ids, size_t *n, int *keep, grpo_error *err) {
    grpo_example wrapped = *ex;
    grpo_message user = {sizeof user, "user", ex->prompt};
    if (ex->prompt && r->simple_format) /* a string prompt becomes the user message */
        wrapped.prompt = NULL, wrapped.messages = &user, wrapped.n_messages = 1;
    grpo_prompt_policy p =
        r->cfg.data_truncation == GRPO_TRUNCATE_SKIP ? GRPO_PROMPT_SKIP : GRPO_PROMPT_TRUNCATE_LEFT;
    prompt_tok pt = {r, 0};
    int rc = grpo_example_prepare(&wrapped, render, r, tokenize, &pt,
                                  (size_t)r->cfg.data_max_prompt_length, p, text, ids, n, keep,
                                  err);
    if (rc == GRPO_OK && *keep && *n == 0) {
        free(*text), free(*ids), *text = NULL, *ids = NULL;
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s:%llu: the prompt is empty (no tokens after the chat template); "
                              "expected some text to answer",
                              ds->path, (unsigned long long)ex->line);
    }
    if (rc != GRPO_OK || !*keep || *n == pt.full) return rc;
    /* left-truncated: rewards see the text the policy saw, special tokens included */
    grpo_tok_text t = {0};
    if ((rc = grpo_tokenizer_decode(r->tok, *ids, *n, 0, &t, err)) != GRPO_OK) {
        grpo_tok_text_free(&t);
        free(*text), free(*ids), *text = NULL, *ids = NULL;
        return rc;
    }
    free(*text);
    *text = t.data ? t.data : dup_str("");
    return *text ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
}

int32_t grpo_left_pad(int32_t *const *prompts, const size_t *n, int32_t B, int32_t pad_id,
                      int32_t **ids, int32_t **mask) {
    size_t P = 1;
    for (int32_t b = 0; b < B; b++) P = n[b] > P ? n[b] : P;
    size_t cells = (size_t)(B > 0 ? B : 0) * P;
    *ids = malloc(cells * sizeof(int32_t));
    *mask = calloc(cells, sizeof(int32_t));
    if (!*ids || !*mask) return -1;
    for (int32_t b = 0; b < B; b++) {
        size_t pad = P - n[b];
        for (size_t t = 0; t < P; t++) {
            (*ids)[(size_t)b * P + t] = t < pad ? pad_id : prompts[b][t - pad];
            (*mask)[(size_t)b * P + t] = t >= pad;
        }
    }
    return (int32_t)P;
}

char *grpo_run_decode(const grpo_run *r, const int32_t *ids, int32_t n) {
    grpo_tok_text t = {0};
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_tokenizer_decode(r->tok, ids, (size_t)n, 1, &t, &err) != GRPO_OK) {
        grpo_tok_text_free(&t);
        return dup_str("");
    }
    return t.data ? t.data : dup_str("");
}

int grpo_run_args_take(grpo_run_args *a, int argc, char **argv, int *i) {
    const char *arg = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(arg, "--model") && v)
        a->model_dir = v;
    else if (!strcmp(arg, "--plugin-path") && v && a->n_extra < 16)
        a->extra_plugin_dirs[a->n_extra++] = v;
    else if (!strcmp(arg, "--set") && v && a->n_sets < GRPO_RUN_MAX_SETS)
        a->sets[a->n_sets++] = v;
    else if (arg[0] != '-' && !a->run_file)
        return a->run_file = arg, 1;
    else
        return 0;
    ++*i;
    return 1;
}
