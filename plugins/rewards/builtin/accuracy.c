/*
 * accuracy.c — builtin.accuracy: extracts the answer from a completion and compares it with the
 * dataset row's gold answer (field `field`, default "answer").
 *
 * extract: answer_tag  the content of the last <answer>...</answer> (trimmed)
 *          boxed       the content of the last \boxed{...} (nested braces balanced)
 *          last_number the last number in the text (-12, 3.5, 1,000 -> 1000)
 *          auto        answer_tag, else boxed, else last_number
 * match:   exact       trimmed strings equal
 *          numeric     both parse as numbers and |pred - gold| <= tolerance * max(1, |gold|)
 * The reward is `correct` or `wrong`; NaN ("no opinion") when the row has no gold answer.
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "builtin.h"

enum { EXTRACT_TAG, EXTRACT_BOXED, EXTRACT_NUMBER, EXTRACT_AUTO };

typedef struct accuracy_state {
    int32_t extract; /* EXTRACT_* */
    int32_t numeric; /* 1 when match = numeric */
    double tolerance, correct, wrong;
    char field[128];
} accuracy_state;

static int32_t accuracy_create(const grpo_host *host, const grpo_config *cfg, void **state,
                               grpo_error *err) {
    (void)host;
    static const char *const extracts[] = {"answer_tag", "boxed", "last_number", "auto", NULL};
    static const char *const matches[] = {"exact", "numeric", NULL};
    accuracy_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    const char *field = grpo_config_get(cfg, "field");
    int32_t rc = grpo_config_choice(cfg, "extract", extracts, EXTRACT_AUTO, &s->extract, err);
    if (rc == GRPO_OK) rc = grpo_config_choice(cfg, "match", matches, 0, &s->numeric, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "tolerance", 1e-6, 0, HUGE_VAL, &s->tolerance, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "correct", 1.0, -HUGE_VAL, HUGE_VAL, &s->correct, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "wrong", 0.0, -HUGE_VAL, HUGE_VAL, &s->wrong, err);
    snprintf(s->field, sizeof s->field, "%s", field ? field : "answer");
    if (rc != GRPO_OK) {
        free(s);
        return rc;
    }
    *state = s;
    return GRPO_OK;
}

/* Copies [begin, end) trimmed of ASCII whitespace into out (cap bytes). */
static void copy_trimmed(const char *begin, const char *end, char *out, size_t cap) {
    while (begin < end && isspace((unsigned char)*begin)) begin++;
    while (end > begin && isspace((unsigned char)end[-1])) end--;
    size_t n = (size_t)(end - begin) < cap - 1 ? (size_t)(end - begin) : cap - 1;
    memcpy(out, begin, n);
    out[n] = 0;
}

static const char *last_occurrence(const char *text, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

static int extract_tag(const char *text, char *out, size_t cap) {
    const char *open = last_occurrence(text, "<answer>");
    const char *close = open ? strstr(open + 8, "</answer>") : NULL;
    if (!close) return 0;
    copy_trimmed(open + 8, close, out, cap);
    return 1;
}

static int extract_boxed(const char *text, char *out, size_t cap) {
    const char *open = last_occurrence(text, "\\boxed{");
    if (!open) return 0;
    const char *p = open + 7;
    for (int depth = 1; *p; p++) {
        depth += (*p == '{') - (*p == '}');
        if (depth == 0) {
            copy_trimmed(open + 7, p, out, cap);
            return 1;
        }
    }
    return 0; /* unbalanced */
}

/* The last run of [-]digits[,digits...][.digits], commas dropped. */
static int extract_number(const char *text, char *out, size_t cap) {
    const char *best = NULL, *best_end = NULL;
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > text && isdigit((unsigned char)p[-1]))) continue;
        const char *q = p;
        while (isdigit((unsigned char)*q) || ((*q == ',' || *q == '.') && isdigit((unsigned char)q[1]))) q++;
        best = (p > text && p[-1] == '-') ? p - 1 : p, best_end = q;
        p = q - 1;
    }
    if (!best) return 0;
    size_t n = 0;
    for (const char *p = best; p < best_end && n + 1 < cap; p++)
        if (*p != ',') out[n++] = *p;
    out[n] = 0;
    return 1;
}

static int extract_answer(int how, const char *text, char *out, size_t cap) {
    switch (how) {
    case EXTRACT_TAG: return extract_tag(text, out, cap);
    case EXTRACT_BOXED: return extract_boxed(text, out, cap);
    case EXTRACT_NUMBER: return extract_number(text, out, cap);
    default:
        return extract_tag(text, out, cap) || extract_boxed(text, out, cap) ||
               extract_number(text, out, cap);
    }
}

/* The gold answer as text: a JSON string unquoted (simple escapes only), a number as written.
 * Returns 0 when the field is absent or null. */
static int gold_text(const char *json, char *out, size_t cap) {
    if (!json || !strcmp(json, "null")) return 0;
    size_t n = 0;
    if (*json != '"') {
        copy_trimmed(json, json + strlen(json), out, cap);
        return 1;
    }
    for (const char *p = json + 1; *p && *p != '"' && n + 1 < cap; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            out[n++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        } else out[n++] = *p;
    }
    out[n] = 0;
    copy_trimmed(out, out + n, out, cap);
    return 1;
}

/* A decimal number with thousands commas dropped ("1,000" -> 1000), by the SDK's strict rule:
 * the whole text, finite, no hex or inf. */
static int parse_number(const char *text, double *v) {
    char buf[128];
    size_t n = 0;
    for (const char *p = text; *p && n + 1 < sizeof buf; p++)
        if (*p != ',') buf[n++] = *p;
    buf[n] = 0;
    return grpo_text_double(buf, v);
}

static int is_correct(const accuracy_state *s, const char *pred, const char *gold) {
    if (!s->numeric) return strcmp(pred, gold) == 0;
    double p, g;
    return parse_number(pred, &p) && parse_number(gold, &g) &&
           fabs(p - g) <= s->tolerance * fmax(1.0, fabs(g));
}

static int32_t accuracy_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                              grpo_error *err) {
    (void)err;
    accuracy_state *s = state;
    char pred[512], gold[512];
    for (uint32_t k = 0; k < n; k++) {
        if (!gold_text(grpo_sample_field(&samples[k], s->field), gold, sizeof gold)) {
            out[k] = NAN;
            continue;
        }
        int ok = extract_answer(s->extract, samples[k].completion, pred, sizeof pred) &&
                 is_correct(s, pred, gold);
        out[k] = (float)(ok ? s->correct : s->wrong);
    }
    return GRPO_OK;
}

const grpo_reward_desc builtin_accuracy_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.accuracy",
    .description = "Answer accuracy against the row's gold answer (tag, boxed or last number)",
    .flags = GRPO_REWARD_THREADSAFE,
    .create = accuracy_create,
    .score = accuracy_score,
    .destroy = free,
};
