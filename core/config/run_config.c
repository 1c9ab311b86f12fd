/* run_config.c — run files: key table, validation, rewards against manifests, dump (see run_config.h). */
#include "config/run_config.h"
#include "config/testing.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/files.h"

/* ---- suggestions ------------------------------------------------------------------------ */

/* Whether needle occurs in hay, ignoring ASCII case. */
static int contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return 1;
    return 0;
}

const char *grpo_suggest(const char *typed, const char *const *candidates, int n) {
    /* A typo changes about one character in three at most; short names allow one edit. */
    int len = (int)strlen(typed), limit = (len + 2) / 3;
    if (limit < 1) limit = 1;
    const char *best = NULL;
    int best_d = limit + 1;
    for (int i = 0; i < n; i++) {
        int d = grpo_edit_distance(typed, candidates[i]);
        if (d < best_d) best = candidates[i], best_d = d;
    }
    /* Else a part of a name ("loss" for loss_type): the shortest name containing it. */
    if (!best && len >= 3)
        for (int i = 0; i < n; i++)
            if (contains_nocase(candidates[i], typed) &&
                (!best || strlen(candidates[i]) < strlen(best)))
                best = candidates[i];
    return best;
}

/* "a, b, c" into buf (cut short when it does not fit). */
static void join_names(const char *const *names, int m, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < m && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", names[i]);
}

/* ---- the key table, generated from config_keys.h ---------------------------------------- */

#define IGNORE_(s, n, d, c, h)
#define CHOICE_TEXT_(constant, text) #text,
#define CHOICE_ARRAY_(s, n, d, list, h) \
    const char *const grpo_choices_##list[] = {GRPO_CHOICES_##list(CHOICE_TEXT_) NULL};
GRPO_RUN_KEYS(IGNORE_, IGNORE_, IGNORE_, IGNORE_, CHOICE_ARRAY_)

int grpo_choice_index(const char *const *choices, const char *text) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(text, choices[i]) == 0) return i;
    return -1;
}

#define NOT_IMPLEMENTED_ROW_(s, n, text) {#s, #n, #text},
static const struct {
    const char *section, *name, *text;
} not_implemented[] = {GRPO_NOT_IMPLEMENTED(NOT_IMPLEMENTED_ROW_)};

static int is_not_implemented(const grpo_run_key *k, const char *text) {
    for (size_t i = 0; i < sizeof not_implemented / sizeof not_implemented[0]; i++)
        if (strcmp(not_implemented[i].section, k->section) == 0 &&
            strcmp(not_implemented[i].name, k->name) == 0 &&
            strcmp(not_implemented[i].text, text) == 0)
            return 1;
    return 0;
}

#define ROW_S_(s, n, d, c, h) {#s, #n, GRPO_KEY_STRING, d, "", NULL, c, h},
#define ROW_I_(s, n, d, c, h) {#s, #n, GRPO_KEY_INT, d, c, NULL, 0, h},
#define ROW_F_(s, n, d, c, h) {#s, #n, GRPO_KEY_FLOAT, d, c, NULL, 0, h},
#define ROW_B_(s, n, d, c, h) {#s, #n, GRPO_KEY_BOOL, d, "", NULL, 0, h},
#define ROW_E_(s, n, d, list, h) {#s, #n, GRPO_KEY_STRING, d, "", grpo_choices_##list, 0, h},
static const grpo_run_key key_table[GRPO_RUN_N_KEYS] = {
    GRPO_RUN_KEYS(ROW_S_, ROW_I_, ROW_F_, ROW_B_, ROW_E_)};

#define SECTION_NAME_(s) #s,
static const char *const section_names[] = {GRPO_RUN_SECTIONS(SECTION_NAME_)};
#define N_SECTIONS ((int)(sizeof section_names / sizeof section_names[0]))

const grpo_run_key *grpo_run_keys(void) { return key_table; }

static int key_index(const char *section, const char *name) {
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++)
        if (strcmp(key_table[i].section, section) == 0 && strcmp(key_table[i].name, name) == 0)
            return i;
    return -1;
}

static int section_index(const char *name) {
    for (int i = 0; i < N_SECTIONS; i++)
        if (strcmp(section_names[i], name) == 0) return i;
    return -1;
}

/* A parsed value of any key type. */
typedef struct value {
    int64_t i;
    double f;
    int32_t b;
    int choice;
    const char *str;
} value;

/* Writes v into the field of key idx. */
#define STORE_S_(s, n, d, c, h) \
    case GRPO_KEYIDX_##s##_##n: cfg->s##_##n = v->str; break;
#define STORE_I_(s, n, d, c, h) \
    case GRPO_KEYIDX_##s##_##n: cfg->s##_##n = v->i; break;
#define STORE_F_(s, n, d, c, h) \
    case GRPO_KEYIDX_##s##_##n: cfg->s##_##n = v->f; break;
#define STORE_B_(s, n, d, c, h) \
    case GRPO_KEYIDX_##s##_##n: cfg->s##_##n = v->b; break;
#define STORE_E_(s, n, d, list, h) \
    case GRPO_KEYIDX_##s##_##n: cfg->s##_##n = (grpo_##list)v->choice; break;
static void store(grpo_run_config *cfg, int idx, const value *v) {
    switch (idx) {
        GRPO_RUN_KEYS(STORE_S_, STORE_I_, STORE_F_, STORE_B_, STORE_E_)
    default: break;
    }
}

/* ---- ranges: "[lo, hi]", "(lo, hi]", ">= lo", "> lo", "<= hi", "< hi", "" -------------- */

typedef struct range {
    double lo, hi;
    int has_lo, has_hi, lo_open, hi_open;
} range;

/* s: a range of config_keys.h (our own text, checked whole here): the bounds need no range. */
static int range_parse(const char *s, range *r) {
    memset(r, 0, sizeof *r);
    char *end;
    while (*s == ' ') s++;
    if (*s == '\0') return 1;
    if (*s == '>' || *s == '<') {
        int lower = *s == '>', open = s[1] != '=';
        double x = strtod(s + 1 + !open, &end);
        if (end == s + 1 + !open || *end) return 0;
        if (lower) r->has_lo = 1, r->lo = x, r->lo_open = open;
        else r->has_hi = 1, r->hi = x, r->hi_open = open;
        return 1;
    }
    if (*s != '[' && *s != '(') return 0;
    r->lo_open = *s == '(', r->has_lo = r->has_hi = 1;
    r->lo = strtod(s + 1, &end);
    if (end == s + 1 || *end != ',') return 0;
    s = end + 1;
    r->hi = strtod(s, &end);
    if (end == s || (*end != ']' && *end != ')') || end[1]) return 0;
    r->hi_open = *end == ')';
    return 1;
}

static int range_contains(const range *r, double x) {
    if (r->has_lo && (r->lo_open ? !(x > r->lo) : !(x >= r->lo))) return 0;
    if (r->has_hi && (r->hi_open ? !(x < r->hi) : !(x <= r->hi))) return 0;
    return 1;
}

/* "an integer in [2, 4096]", "a number >= 0", ... */
static void range_describe(const grpo_run_key *k, char *buf, size_t n) {
    const char *what = k->type == GRPO_KEY_INT ? "an integer" : "a number";
    const char *r = k->range;
    if (!*r) snprintf(buf, n, "%s", what);
    else snprintf(buf, n, "%s %s%s", what, (*r == '[' || *r == '(') ? "in " : "", r);
}

/* Parses text as a value of key k. On failure writes "expected ..., got '...'" into why. */
static int parse_value(const grpo_run_key *k, const char *text, value *v, char *why, size_t n) {
    memset(v, 0, sizeof *v);
    v->str = text;
    if (k->choices) {
        if ((v->choice = grpo_choice_index(k->choices, text)) >= 0) return 1;
        int m = 0;
        while (k->choices[m]) m++;
        char list[200];
        join_names(k->choices, m, list, sizeof list);
        const char *near = grpo_suggest(text, k->choices, m);
        if (is_not_implemented(k, text))
            snprintf(why, n, "'%s' is not implemented in grpo; expected one of %s", text, list);
        else
            snprintf(why, n, "expected one of %s, got '%s'%s%s%s", list, text,
                     near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
        return 0;
    }
    if (!grpo_key_value_ok(k->type, text, why, n)) return 0;
    range r;
    if (!range_parse(k->range, &r)) {
        snprintf(why, n, "internal: bad range \"%s\" in config_keys.h", k->range);
        return 0;
    }
    double x = 0;
    switch (k->type) {
    case GRPO_KEY_INT: grpo_text_int(text, &v->i), x = (double)v->i; break;
    case GRPO_KEY_FLOAT: grpo_text_double(text, &v->f), x = v->f; break;
    case GRPO_KEY_BOOL: grpo_text_bool(text, &v->b); break;
    default: break;
    }
    if (range_contains(&r, x)) return 1;
    char what[96];
    range_describe(k, what, sizeof what);
    snprintf(why, n, "expected %s, got %s", what, text);
    return 0;
}

/* ---- loading ---------------------------------------------------------------------------- */

typedef struct loader {
    const grpo_ini_doc *doc;
    const char *const *sets; /* the --set overrides; an entry from sets[k] has line -(k+1) */
    const grpo_registry *reg;
    unsigned flags;
    grpo_run_config *cfg;
    grpo_diag *diag;
    int n_errors;
    int oom;
    int section_line[N_SECTIONS]; /* header line of each fixed section; 0 = absent */
} loader;

static void fail(loader *L, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Records one error at line of the run file (0 = the file as a whole, < 0 = a --set override). */
static void fail(loader *L, int line, const char *fmt, ...) {
    char what[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (line < 0) grpo_diag_add(L->diag, "--set %s: %s", L->sets[-line - 1], what);
    else if (line > 0) grpo_diag_add(L->diag, "%s:%d: %s", L->doc->path, line, what);
    else grpo_diag_add(L->diag, "%s: %s", L->doc->path, what);
    L->n_errors++;
}

/* Where a value was set, for "first set at ...": "line N" of the file, or "--set TEXT". */
static const char *place(const loader *L, int line, char *buf, size_t n) {
    if (line < 0) snprintf(buf, n, "--set %s", L->sets[-line - 1]);
    else snprintf(buf, n, "line %d", line);
    return buf;
}

static char *dup_or_flag(loader *L, const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) L->oom = 1;
    return d;
}

/* An unknown key of a fixed section: the nearest key of this section, unless a key of another
 * section is strictly nearer (`num_generation` in [grpo] is sampling.num_generations). */
static void unknown_key(loader *L, const char *section, const grpo_ini_entry *e) {
    const char *names[GRPO_RUN_N_KEYS], *owner[GRPO_RUN_N_KEYS];
    int m = 0, m_same = 0;
    for (int pass = 0; pass < 2; pass++) /* this section's keys first */
        for (int i = 0; i < GRPO_RUN_N_KEYS; i++)
            if ((strcmp(key_table[i].section, section) == 0) == (pass == 0))
                names[m] = key_table[i].name, owner[m++] = key_table[i].section, m_same += !pass;
    const char *same = grpo_suggest(e->key, names, m_same), *any = grpo_suggest(e->key, names, m);
    int j = 0;
    while (any && names[j] != any) j++;
    if (any && j >= m_same &&
        (!same || grpo_edit_distance(e->key, any) < grpo_edit_distance(e->key, same))) {
        if (strcmp(any, e->key) == 0)
            fail(L, e->line, "unknown key '%s' in [%s]; it is a key of [%s]", e->key, section,
                 owner[j]);
        else
            fail(L, e->line, "unknown key '%s' in [%s]; %s is a key of [%s]", e->key, section, any,
                 owner[j]);
    } else if (same)
        fail(L, e->line, "unknown key '%s' in [%s] (did you mean %s?)", e->key, section, same);
    else
        fail(L, e->line, "unknown key '%s' in [%s] (see `grpo config keys`)", e->key, section);
}

static void read_fixed_section(loader *L, const grpo_ini_section *s, int sec) {
    grpo_run_config *cfg = L->cfg;
    if (L->section_line[sec])
        fail(L, s->line, "duplicate section [%s] (first at line %d); write its keys in one section",
             s->name, L->section_line[sec]);
    else
        L->section_line[sec] = s->line;
    for (int j = 0; j < s->n_entries; j++) {
        const grpo_ini_entry *e = &s->entries[j];
        int idx = key_index(s->name, e->key);
        if (idx < 0 && strcmp(s->name, "env") == 0) {
            continue; /* the env plugin's own key: check_env_plugin resolves it */
        } else if (idx < 0) {
            unknown_key(L, s->name, e);
        } else if (cfg->line[idx]) {
            char at[300];
            fail(L, e->line, "duplicate key %s.%s (first set at %s)", s->name, e->key,
                 place(L, cfg->line[idx], at, sizeof at));
        } else {
            cfg->text[idx] = dup_or_flag(L, e->value);
            cfg->line[idx] = e->line;
        }
    }
}

static void unknown_section(loader *L, const grpo_ini_section *s) {
    char reward_guess[128];
    const char *cands[N_SECTIONS + 1];
    int m = 0;
    for (int i = 0; i < N_SECTIONS; i++) cands[m++] = section_names[i];
    /* [rewards.fmt], [reward fmt], [Reward.fmt]: probably a reward section. */
    const char *dot = strpbrk(s->name, ". :_");
    if (dot && dot[1]) {
        size_t head = (size_t)(dot - s->name);
        char first[64];
        snprintf(first, sizeof first, "%.*s", (int)(head < 63 ? head : 63), s->name);
        const char *r[] = {"reward"};
        if (grpo_suggest(first, r, 1)) {
            snprintf(reward_guess, sizeof reward_guess, "reward.%s", dot + 1);
            cands[m++] = reward_guess;
        }
    }
    const char *near = grpo_suggest(s->name, cands, m);
    if (near)
        fail(L, s->line, "unknown section [%s] (did you mean [%s]?)", s->name, near);
    else
        fail(L, s->line,
             "unknown section [%s]; expected one of [model] [reference] [data] [sampling] [grpo] "
             "[optim] [train] [log] [checkpoint] [env] [reward.NAME]",
             s->name);
}

/* ---- reward sections -------------------------------------------------------------------- */

static const grpo_entry *registry_find(const grpo_registry *reg, const char *id) {
    for (int p = 0; reg && p < reg->n_packs; p++)
        for (int e = 0; e < reg->packs[p]->n_entries; e++)
            if (strcmp(reg->packs[p]->entries[e].id, id) == 0) return &reg->packs[p]->entries[e];
    return NULL;
}

/* "no plugin 'x' on the plugin path" with the nearest id of that kind, or the ids there are. */
static void unknown_plugin(loader *L, const char *id, int line, grpo_entry_kind kind) {
    char broken[1400];
    if (L->reg && grpo_registry_broken_reason(L->reg, id, broken, sizeof broken)) {
        fail(L, line, "no plugin '%s' on the plugin path: %s", id, broken);
        return;
    }
    const char *word = grpo_entry_kind_name(kind);
    const char **ids = NULL;
    int m = 0, cap = 0;
    for (int p = 0; L->reg && p < L->reg->n_packs; p++)
        for (int e = 0; e < L->reg->packs[p]->n_entries; e++) {
            const grpo_entry *en = &L->reg->packs[p]->entries[e];
            if (en->kind != kind) continue;
            if (m == cap) {
                const char **t = realloc(ids, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *t);
                if (!t) break;
                ids = t;
            }
            ids[m++] = en->id;
        }
    const char *near = grpo_suggest(id, ids, m);
    char known[512];
    join_names(ids, m, known, sizeof known);
    if (near)
        fail(L, line, "no plugin '%s' on the plugin path (did you mean %s?)", id, near);
    else if (m)
        fail(L, line, "no plugin '%s' on the plugin path (%s plugins found: %s)", id, word, known);
    else
        fail(L, line,
             "no plugin '%s' on the plugin path (no %s plugins were found: use --plugin-path "
             "or GRPO_PLUGIN_PATH)",
             id, word);
    free(ids);
}

static const grpo_key_def *entry_key(const grpo_entry *e, const char *name) {
    for (int i = 0; i < e->n_keys; i++)
        if (strcmp(e->keys[i].name, name) == 0) return &e->keys[i];
    return NULL;
}

static int reward_add_value(loader *L, grpo_reward_spec *r, const char *key, const char *value,
                            int line) {
    uint32_t n = r->n + 1;
    char **k = realloc(r->keys, n * sizeof *k);
    if (k) r->keys = k;
    char **v = realloc(r->values, n * sizeof *v);
    if (v) r->values = v;
    int *l = realloc(r->lines, n * sizeof *l);
    if (l) r->lines = l;
    if (!k || !v || !l) return L->oom = 1, 0;
    r->keys[r->n] = dup_or_flag(L, key);
    r->values[r->n] = dup_or_flag(L, value);
    r->lines[r->n] = line;
    r->n = n;
    return 1;
}

static void unknown_plugin_key(loader *L, const grpo_ini_section *s, const grpo_entry *en,
                               const grpo_ini_entry *e) {
    const char **names = malloc(((size_t)en->n_keys + 1) * sizeof *names);
    int m = 0;
    for (int i = 0; names && i < en->n_keys; i++) names[m++] = en->keys[i].name;
    const char *near = grpo_suggest(e->key, names, m);
    char known[400];
    join_names(names, m, known, sizeof known);
    if (near)
        fail(L, e->line, "unknown key '%s' for plugin %s in [%s] (did you mean %s?)", e->key,
             en->id, s->name, near);
    else
        fail(L, e->line, "unknown key '%s' for plugin %s in [%s] (its keys: %s)", e->key, en->id,
             s->name,
             m ? known : "none besides plugin, weight, isolate, timeout, workers and "
                         "rows_independent");
    free(names);
}

/* Keys of every [reward.NAME] section that the host reads; the plugin never sees them. */
static int host_reward_key(const char *key) {
    return strcmp(key, "plugin") == 0 || strcmp(key, "weight") == 0 ||
           strcmp(key, "isolate") == 0 || strcmp(key, "timeout") == 0 ||
           strcmp(key, "workers") == 0 || strcmp(key, "rows_independent") == 0;
}

/* The first line of r's host key (0 when not set yet). */
static int *host_key_line(grpo_reward_spec *r, const char *key) {
    return !strcmp(key, "plugin")    ? &r->plugin_line
           : !strcmp(key, "weight")  ? &r->weight_line
           : !strcmp(key, "isolate") ? &r->isolate_line
           : !strcmp(key, "workers") ? &r->workers_line
           : !strcmp(key, "rows_independent") ? &r->rows_independent_line
                                     : &r->timeout_line;
}

/* One host key of [reward.NAME] (e): its value checked and stored in r. */
static void read_host_reward_key(loader *L, const grpo_ini_section *s, grpo_reward_spec *r,
                                 const grpo_ini_entry *e) {
    char why[256];
    if (!strcmp(e->key, "plugin")) {
        r->plugin = dup_or_flag(L, e->value), r->plugin_line = e->line;
    } else if (!strcmp(e->key, "isolate")) {
        if (!grpo_key_value_ok(GRPO_KEY_BOOL, e->value, why, sizeof why))
            fail(L, e->line, "%s.isolate: %s", s->name, why);
        else
            grpo_text_bool(e->value, &r->isolate), r->isolate_line = e->line;
    } else if (!strcmp(e->key, "weight")) {
        if (!grpo_key_value_ok(GRPO_KEY_FLOAT, e->value, why, sizeof why))
            fail(L, e->line, "%s.weight: %s", s->name, why);
        else
            grpo_text_double(e->value, &r->weight), r->weight_line = e->line;
    } else if (!strcmp(e->key, "rows_independent")) {
        if (!grpo_key_value_ok(GRPO_KEY_BOOL, e->value, why, sizeof why))
            fail(L, e->line, "%s.rows_independent: %s", s->name, why);
        else
            grpo_text_bool(e->value, &r->rows_independent), r->rows_independent_line = e->line;
    } else if (!strcmp(e->key, "workers")) {
        int64_t w = 0;
        if (!grpo_text_int(e->value, &w) || w < 1 || w > GRPO_REWARD_WORKERS_MAX)
            fail(L, e->line, "%s.workers: expected an integer in [1, %d] (how many calls of the "
                 "reward may score at once), got '%s'", s->name, GRPO_REWARD_WORKERS_MAX,
                 e->value);
        else
            r->workers = (int32_t)w, r->workers_line = e->line;
    } else { /* timeout */
        double t = 0;
        if (!grpo_key_value_ok(GRPO_KEY_FLOAT, e->value, why, sizeof why))
            fail(L, e->line, "%s.timeout: %s; expected seconds one score call may take",
                 s->name, why);
        else if (grpo_text_double(e->value, &t), !(t > 0 && t < 1e6))
            fail(L, e->line, "%s.timeout: expected seconds in (0, 1e6) that one score call may "
                 "take, got %s", s->name, e->value);
        else
            r->timeout = t, r->timeout_line = e->line;
    }
}

/* The default timeout of r when the file sets none: its plugin's manifest default for a
 * `timeout` key of its own (builtin.exec), else GRPO_REWARD_TIMEOUT_DEFAULT. */
static void default_timeout(grpo_reward_spec *r) {
    if (r->timeout_line) return;
    r->timeout = GRPO_REWARD_TIMEOUT_DEFAULT;
    const grpo_key_def *kd = r->entry ? entry_key(r->entry, "timeout") : NULL;
    double t = 0;
    if (kd && kd->n_defaults == 1 && grpo_text_double(kd->defaults[0], &t) == 0 && t > 0 &&
        t < 1e6)
        r->timeout = t;
}

/* Checks the plugin's keys written in s against the manifest entry, then lists every key of the
 * entry in manifest order: the file's values where set, else the manifest defaults. */
static void resolve_plugin_keys(loader *L, const grpo_ini_section *s, grpo_reward_spec *r,
                                int (*host_key)(const char *key)) {
    const grpo_entry *en = r->entry;
    for (int j = 0; j < s->n_entries; j++) {
        const grpo_ini_entry *e = &s->entries[j];
        if (host_key(e->key)) continue;
        const grpo_key_def *kd = entry_key(en, e->key);
        char why[512];
        if (!kd) {
            unknown_plugin_key(L, s, en, e);
            continue;
        }
        if (kd->type != GRPO_KEY_LIST) {
            for (int i = 0; i < j; i++)
                if (strcmp(s->entries[i].key, e->key) == 0) {
                    char at[300];
                    fail(L, e->line, "duplicate key %s.%s (first set at %s; only %s keys repeat)",
                         s->name, e->key, place(L, s->entries[i].line, at, sizeof at),
                         grpo_key_type_name(GRPO_KEY_LIST));
                    break;
                }
        }
        if (!grpo_key_value_ok(kd->type, e->value, why, sizeof why))
            fail(L, e->line, "%s.%s: %s (%s key of %s)", s->name, e->key, why,
                 grpo_key_type_name(kd->type), en->id);
    }
    for (int i = 0; i < en->n_keys; i++) {
        const grpo_key_def *kd = &en->keys[i];
        int set = 0;
        for (int j = 0; j < s->n_entries; j++)
            if (strcmp(s->entries[j].key, kd->name) == 0) {
                if (set && kd->type != GRPO_KEY_LIST) break;
                reward_add_value(L, r, kd->name, s->entries[j].value, s->entries[j].line);
                set = 1;
            }
        if (!set && !kd->has_default)
            fail(L, s->line, "[%s] has no %s; plugin %s requires it (%s: %s)", s->name, kd->name,
                 en->id, grpo_key_type_name(kd->type), kd->help ? kd->help : "");
        for (int d = 0; !set && d < kd->n_defaults; d++)
            reward_add_value(L, r, kd->name, kd->defaults[d], 0);
    }
}

static int valid_reward_name(const char *name) {
    if (!*name) return 0;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-') return 0;
    return 1;
}

/* The directory of the run file being loaded ("." for a bare file name), malloc'd. */
static char *run_dir(loader *L) {
    const char *path = L->cfg->path, *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) return dup_or_flag(L, ".");
    char *d = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (!d) L->oom = 1;
    return d;
}

static void read_reward_section(loader *L, const grpo_ini_section *s) {
    grpo_run_config *cfg = L->cfg;
    const char *name = s->name + strlen("reward.");
    if (!valid_reward_name(name)) {
        fail(L, s->line, "bad reward section [%s]: expected [reward.NAME] with a NAME of letters, "
                         "digits, '_' or '-'",
             s->name);
        return;
    }
    for (int i = 0; i < cfg->n_rewards; i++)
        if (strcmp(cfg->rewards[i].name, name) == 0) {
            fail(L, s->line, "duplicate section [%s] (first at line %d); give each reward its "
                             "own NAME",
                 s->name, cfg->rewards[i].line);
            return;
        }
    grpo_reward_spec *t = realloc(cfg->rewards, (size_t)(cfg->n_rewards + 1) * sizeof *t);
    if (!t) {
        L->oom = 1;
        return;
    }
    cfg->rewards = t;
    grpo_reward_spec *r = &cfg->rewards[cfg->n_rewards++];
    memset(r, 0, sizeof *r);
    r->name = dup_or_flag(L, name);
    r->section = dup_or_flag(L, s->name);
    r->dir = run_dir(L);
    r->line = s->line;
    r->weight = 1.0;
    r->workers = 1;
    for (int j = 0; j < s->n_entries; j++) {
        const grpo_ini_entry *e = &s->entries[j];
        if (!host_reward_key(e->key)) continue;
        int first = *host_key_line(r, e->key);
        if (first) {
            char at[300];
            fail(L, e->line, "duplicate key %s.%s (first set at %s)", s->name, e->key,
                 place(L, first, at, sizeof at));
            continue;
        }
        read_host_reward_key(L, s, r, e);
    }
    if (!r->plugin_line) {
        fail(L, s->line, "[%s] has no plugin key; expected plugin = pack.id (see `grpo plugins "
                         "list`)",
             s->name);
        return;
    }
    r->entry = registry_find(L->reg, r->plugin);
    if (!r->entry) {
        unknown_plugin(L, r->plugin, r->plugin_line, GRPO_KIND_REWARD);
        return;
    }
    if (r->entry->kind != GRPO_KIND_REWARD) {
        fail(L, r->plugin_line, "'%s' is a%s %s plugin; [%s] needs a reward plugin", r->plugin,
             r->entry->kind == GRPO_KIND_ENV ? "n" : "", grpo_entry_kind_name(r->entry->kind),
             s->name);
        r->entry = NULL;
        return;
    }
    default_timeout(r);
    if (!r->rows_independent_line) r->rows_independent = r->entry->rows_independent;
    resolve_plugin_keys(L, s, r, host_reward_key);
}

/* Keys of [env] that the host reads (config_keys.h); the plugin never sees them. */
static int host_env_key(const char *key) {
    return key_index("env", key) >= 0;
}

/* env.plugin, when set, names an env entry; the other keys of [env] are that plugin's. */
static void check_env_plugin(loader *L) {
    grpo_run_config *cfg = L->cfg;
    const grpo_ini_section *s = NULL;
    for (int i = 0; i < L->doc->n_sections; i++)
        if (L->doc->sections[i].line && strcmp(L->doc->sections[i].name, "env") == 0)
            s = &L->doc->sections[i];
    int line = cfg->line[GRPO_KEYIDX_env_plugin];
    if (!cfg->env_plugin || !cfg->env_plugin[0]) {
        for (int j = 0; s && j < s->n_entries; j++)
            if (!host_env_key(s->entries[j].key))
                fail(L, s->entries[j].line, "env.%s: [env] has no plugin, so no plugin keys; "
                     "expected env.plugin = pack.id first, or one of [env]'s own keys",
                     s->entries[j].key);
        return;
    }
    grpo_reward_spec *r = &cfg->env;
    const grpo_entry *e = registry_find(L->reg, cfg->env_plugin);
    if (!e) {
        unknown_plugin(L, cfg->env_plugin, line, GRPO_KIND_ENV);
        return;
    }
    if (e->kind != GRPO_KIND_ENV) {
        fail(L, line, "'%s' is a %s plugin; env.plugin needs an env plugin (kind = env)",
             cfg->env_plugin, grpo_entry_kind_name(e->kind));
        return;
    }
    r->name = dup_or_flag(L, "env"), r->section = dup_or_flag(L, "env");
    r->plugin = dup_or_flag(L, cfg->env_plugin), r->plugin_line = line;
    r->dir = run_dir(L), r->line = s ? s->line : 0, r->weight = 1.0, r->entry = e;
    grpo_ini_section none = {0};
    none.name = (char *)"env";
    resolve_plugin_keys(L, s ? s : &none, r, host_env_key);
}

/* ---- defaults, typed values, whole-file checks ------------------------------------------ */

/* Fills every key the file did not set from its default ("@section.key" from that key), then
 * parses every key's text into its field. */
static void resolve_values(loader *L) {
    grpo_run_config *cfg = L->cfg;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
            const char *def = key_table[i].def;
            if (cfg->line[i] || (def[0] == '@') != pass) continue;
            if (pass == 0) {
                cfg->text[i] = dup_or_flag(L, def);
                continue;
            }
            const char *dot = strchr(def + 1, '.');
            char sec[32];
            snprintf(sec, sizeof sec, "%.*s", dot ? (int)(dot - def - 1) : 0, def + 1);
            int ref = dot ? key_index(sec, dot + 1) : -1;
            if (ref < 0 || key_table[ref].def[0] == '@') {
                fail(L, 0, "internal: default \"%s\" of %s.%s names no plain key", def,
                     key_table[i].section, key_table[i].name);
                continue;
            }
            cfg->text[i] = dup_or_flag(L, cfg->text[ref]);
        }
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
        const grpo_run_key *k = &key_table[i];
        value v;
        char why[512];
        if (!cfg->text[i]) continue; /* out of memory, already flagged */
        if (parse_value(k, cfg->text[i], &v, why, sizeof why)) {
            store(cfg, i, &v);
        } else if (cfg->line[i]) {
            fail(L, cfg->line[i], "%s.%s: %s", k->section, k->name, why);
        } else {
            const char *from = k->def[0] == '@' ? k->def + 1 : "the built-in default";
            fail(L, 0, "%s.%s takes its value from %s: %s", k->section, k->name, from, why);
        }
    }
}

static void check_required(loader *L) {
    grpo_run_config *cfg = L->cfg;
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
        const grpo_run_key *k = &key_table[i];
        if (!(k->flags & GRPO_KEY_REQUIRED) || (cfg->text[i] && cfg->text[i][0])) continue;
        int sec = section_index(k->section);
        if (cfg->line[i])
            fail(L, cfg->line[i], "%s.%s is empty; expected the %s", k->section, k->name, k->help);
        else if (L->section_line[sec])
            fail(L, L->section_line[sec], "[%s] has no %s; expected %s = the %s", k->section,
                 k->name, k->name, k->help);
        else
            fail(L, 0, "no [%s] section; a training run needs %s.%s: the %s", k->section,
                 k->section, k->name, k->help);
    }
    if (!cfg->n_rewards)
        fail(L, 0, "no [reward.NAME] section; a training run needs at least one reward "
                   "(plugin = pack.id, see `grpo plugins list`)");
}

static void check_paths(loader *L) {
    grpo_run_config *cfg = L->cfg;
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
        const grpo_run_key *k = &key_table[i];
        if (!(k->flags & (GRPO_KEY_DIR | GRPO_KEY_FILE)) || !cfg->text[i] || !cfg->text[i][0])
            continue;
        if (!cfg->line[i] && k->def[0] == '@') continue; /* checked as the key it copies */
        char *p = grpo_run_config_input_path(cfg, cfg->text[i]);
        if (!p) {
            L->oom = 1;
            continue;
        }
        struct stat st;
        int want_dir = (k->flags & GRPO_KEY_DIR) != 0;
        const char *kind = want_dir ? "directory" : "file";
        if (stat(p, &st) != 0)
            fail(L, cfg->line[i], "%s.%s: no %s '%s' (looked at %s: %s)", k->section, k->name,
                 kind, cfg->text[i], p, strerror(errno));
        else if (want_dir ? !S_ISDIR(st.st_mode) : S_ISDIR(st.st_mode))
            fail(L, cfg->line[i], "%s.%s: '%s' is not a %s (looked at %s)", k->section, k->name,
                 cfg->text[i], kind, p);
        free(p);
    }
}

/* model.plugin, when set, names a model entry on the plugin path. */
static void check_model_plugin(loader *L) {
    grpo_run_config *cfg = L->cfg;
    int line = cfg->line[GRPO_KEYIDX_model_plugin];
    if (!cfg->model_plugin || !cfg->model_plugin[0]) return;
    const grpo_entry *e = registry_find(L->reg, cfg->model_plugin);
    if (!e)
        unknown_plugin(L, cfg->model_plugin, line, GRPO_KIND_MODEL);
    else if (e->kind != GRPO_KIND_MODEL)
        fail(L, line, "'%s' is a%s %s plugin; model.plugin needs a model plugin", cfg->model_plugin,
             e->kind == GRPO_KIND_ENV ? "n" : "", grpo_entry_kind_name(e->kind));
    else
        cfg->model_entry = e;
}

/* Rules that tie keys together. */
static void check_cross(loader *L) {
    grpo_run_config *cfg = L->cfg;
    const char *fmt = cfg->data_chat_template;
    if (fmt && fmt[0] && !strstr(fmt, "{prompt}") && !strstr(fmt, "{user}"))
        fail(L, cfg->line[GRPO_KEYIDX_data_chat_template],
             "data.chat_template: expected a format holding {prompt} (the user's text), got "
             "'%.80s'; without it every prompt would be that fixed text",
             fmt);
    if (cfg->grpo_delta != 0 && cfg->grpo_delta <= 1)
        fail(L, cfg->line[GRPO_KEYIDX_grpo_delta],
             "grpo.delta: expected 0 (off) or a bound above 1, got %s",
             cfg->text[GRPO_KEYIDX_grpo_delta]);
}

/* ---- public entry points ---------------------------------------------------------------- */

/* Frees cfg on failure and puts the first new problem (of d->msg[first..]) into err. */
static int finish(grpo_run_config *cfg, grpo_diag *d, int first, grpo_diag *own, int status,
                  grpo_error *err) {
    if (status != GRPO_OK) {
        int more = d->n - first - 1;
        grpo_run_config_free(cfg);
        if (more < 0)
            grpo_error_set(err, status, "invalid run file (out of memory?)");
        else if (more == 0)
            grpo_error_set(err, status, "%s", d->msg[first]);
        else
            grpo_error_set(err, status, "%s (and %d more problems)", d->msg[first], more);
    }
    grpo_diag_free(own);
    return status;
}

static int load_doc(grpo_run_config *cfg, const grpo_ini_doc *doc, const char *const *sets,
                    const grpo_registry *reg, unsigned flags, grpo_diag *diag) {
    loader L = {.doc = doc, .sets = sets, .reg = reg, .flags = flags, .cfg = cfg, .diag = diag};
    if (!(cfg->path = strdup(doc->path))) return GRPO_ERR_NOMEM;
    for (int i = 0; i < doc->n_sections; i++) {
        const grpo_ini_section *s = &doc->sections[i];
        int sec = section_index(s->name);
        if (s->line == 0) {
            for (int j = 0; j < s->n_entries; j++)
                fail(&L, s->entries[j].line,
                     "key '%s' before any [section] header; expected a [section] first",
                     s->entries[j].key);
        } else if (sec >= 0) {
            read_fixed_section(&L, s, sec);
        } else if (strncmp(s->name, "reward.", 7) == 0) {
            read_reward_section(&L, s);
        } else {
            unknown_section(&L, s);
        }
    }
    resolve_values(&L);
    check_model_plugin(&L);
    check_env_plugin(&L);
    if (flags & GRPO_CONFIG_TRAIN) check_required(&L);
    if (flags & GRPO_CONFIG_CHECK_PATHS) check_paths(&L);
    check_cross(&L);
    if (L.oom) return GRPO_ERR_NOMEM;
    return L.n_errors ? GRPO_ERR_INVALID : GRPO_OK;
}

/* Copies [b, e) with the spaces around it trimmed (as the INI reader trims) into out. */
static int trimmed(const char *b, const char *e, char *out, size_t n) {
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if (e == b || (size_t)(e - b) >= n) return 0;
    memcpy(out, b, (size_t)(e - b));
    out[e - b] = '\0';
    return 1;
}

#define SET_NAME_MAX 256 /* a --set's section or key, with its NUL */

/* SECTION.KEY=VALUE (reward.NAME.KEY=VALUE: section reward.NAME) into its three parts (section
 * and key hold SET_NAME_MAX bytes, value nv). NULL when it splits, else what is wrong (why, of
 * why_size bytes, holds the text): not of that form, a name too long, a value too long or over
 * more than one line (a run-file value is one line; the INI file cannot hold it either). */
static const char *split_set(const char *text, char *section, char *key, char *value, size_t nv,
                             char *why, size_t why_size) {
    const char *eq = strchr(text, '='), *dot = eq ? memchr(text, '.', (size_t)(eq - text)) : NULL;
    if (dot && strncmp(text, "reward.", 7) == 0 && dot == text + 6)
        dot = memchr(text + 7, '.', (size_t)(eq - text - 7));
    if (!dot || !trimmed(text, dot, section, SET_NAME_MAX) ||
        !trimmed(dot + 1, eq, key, SET_NAME_MAX)) {
        snprintf(why, why_size, "--set %s: expected SECTION.KEY=VALUE (reward.NAME.KEY=VALUE for "
                                "a reward's key)", text);
        return why;
    }
    const char *v = eq + 1, *end = v + strlen(v);
    if (strpbrk(v, "\r\n")) {
        snprintf(why, why_size, "--set %s.%s: the value holds a line break; expected one line",
                 section, key);
        return why;
    }
    if (!trimmed(v, end, value, nv)) value[0] = '\0'; /* an empty value is the file's "key =" */
    if (!value[0] && strspn(v, " \t\f\v") != strlen(v)) {
        snprintf(why, why_size, "--set %s.%s: the value is %zu bytes; the limit is %zu", section,
                 key, strlen(v), nv - 1);
        return why;
    }
    return NULL;
}

/* Applies the --set overrides to doc, after the file: entry k has line -(k+1) for messages. The
 * first override of a key replaces the file's value; a repeated one adds a value (list keys). */
static int apply_sets(grpo_ini_doc *doc, const char *const *sets, int n_sets, grpo_diag *d) {
    /* per override: section, key, and a flag byte (non-zero: malformed) */
    char (*part)[3][SET_NAME_MAX] = calloc((size_t)(n_sets ? n_sets : 1), sizeof *part);
    char value[4096], why[640];
    if (!part) return GRPO_ERR_NOMEM;
    int rc = GRPO_OK;
    for (int k = 0; k < n_sets && rc != GRPO_ERR_NOMEM; k++) {
        if (split_set(sets[k], part[k][0], part[k][1], value, sizeof value, why, sizeof why)) {
            grpo_diag_add(d, "%s", why);
            part[k][2][0] = 'x', rc = GRPO_ERR_INVALID; /* malformed: matches no later one */
            continue;
        }
        int again = 0;
        for (int j = 0; j < k && !again; j++)
            again = !part[j][2][0] && !strcmp(part[j][0], part[k][0]) &&
                    !strcmp(part[j][1], part[k][1]);
        if (grpo_ini_doc_set(doc, part[k][0], part[k][1], value, -(k + 1), !again) != 0)
            rc = GRPO_ERR_NOMEM;
    }
    free(part);
    return rc;
}

int grpo_run_config_load_set(grpo_run_config *cfg, const char *path, const char *const *sets,
                             int n_sets, const grpo_registry *reg, unsigned flags, grpo_diag *diag,
                             grpo_error *err) {
    grpo_diag own = {0};
    grpo_diag *d = diag ? diag : &own;
    int first = d->n, status;
    grpo_ini_doc doc;
    memset(cfg, 0, sizeof *cfg);
    if (grpo_ini_read_file(&doc, path, d) != 0) status = doc.path ? GRPO_ERR_INVALID : GRPO_ERR_IO;
    else if ((status = apply_sets(&doc, sets, n_sets, d)) != GRPO_ERR_NOMEM) {
        int malformed = status; /* the well-formed overrides are still checked with the file */
        status = load_doc(cfg, &doc, sets, reg, flags, d);
        if (status == GRPO_OK) status = malformed;
    }
    grpo_ini_doc_free(&doc);
    return finish(cfg, d, first, &own, status, err);
}

int grpo_run_config_load(grpo_run_config *cfg, const char *path, const grpo_registry *reg,
                         unsigned flags, grpo_diag *diag, grpo_error *err) {
    return grpo_run_config_load_set(cfg, path, NULL, 0, reg, flags, diag, err);
}

int grpo_run_config_load_string(grpo_run_config *cfg, const char *name, const char *text,
                                const grpo_registry *reg, unsigned flags, grpo_diag *diag,
                                grpo_error *err) {
    grpo_diag own = {0};
    grpo_diag *d = diag ? diag : &own;
    int first = d->n, status;
    grpo_ini_doc doc;
    memset(cfg, 0, sizeof *cfg);
    if (grpo_ini_read_string(&doc, name, text, d) != 0) status = GRPO_ERR_INVALID;
    else status = load_doc(cfg, &doc, NULL, reg, flags, d);
    grpo_ini_doc_free(&doc);
    return finish(cfg, d, first, &own, status, err);
}

void grpo_run_config_free(grpo_run_config *cfg) {
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) free(cfg->text[i]);
    for (int i = 0; i < cfg->n_rewards; i++) {
        grpo_reward_spec *r = &cfg->rewards[i];
        for (uint32_t j = 0; j < r->n; j++) free(r->keys[j]), free(r->values[j]);
        free(r->keys), free(r->values), free(r->lines);
        free(r->name), free(r->section), free(r->plugin), free(r->dir);
    }
    grpo_reward_spec *env = &cfg->env;
    for (uint32_t j = 0; j < env->n; j++) free(env->keys[j]), free(env->values[j]);
    free(env->keys), free(env->values), free(env->lines);
    free(env->name), free(env->section), free(env->plugin), free(env->dir);
    free(cfg->rewards), free(cfg->path);
    memset(cfg, 0, sizeof *cfg);
}

const grpo_reward_spec *grpo_run_config_reward(const grpo_run_config *cfg, const char *name) {
    for (int i = 0; i < cfg->n_rewards; i++)
        if (strcmp(cfg->rewards[i].name, name) == 0) return &cfg->rewards[i];
    return NULL;
}

/* "FILE:LINE" of a key the file set, "FILE (--set S.K)" of one --set set, else "FILE". */
static const char *where_set(const grpo_run_config *cfg, const char *section, const char *name,
                             char *buf, size_t size) {
    int line = cfg->line[key_index(section, name)]; /* < 0: set by --set */
    if (line > 0)
        snprintf(buf, size, "%s:%d", cfg->path, line);
    else
        snprintf(buf, size, line < 0 ? "%s (--set %s.%s)" : "%s", cfg->path, section, name);
    return buf;
}

int grpo_run_config_warn_cannot_learn(const grpo_run_config *cfg, FILE *out) {
    char at[4200];
    int n = 0;
    if (cfg->sampling_temperature == 0 && cfg->sampling_num_generations > 1) {
        fprintf(out,
                "warning: %s: sampling.temperature = 0 with sampling.num_generations = %lld: "
                "greedy decoding gives every completion of a group the same text, so every "
                "advantage is 0 and nothing is learnt (set temperature > 0)\n",
                where_set(cfg, "sampling", "temperature", at, sizeof at),
                cfg->sampling_num_generations);
        n++;
    }
    int weighted = 0;
    for (int k = 0; k < cfg->n_rewards; k++) weighted |= cfg->rewards[k].weight != 0;
    if (cfg->n_rewards > 0 && !weighted) {
        fprintf(out,
                "warning: %s: every reward weight is 0 (",
                cfg->path);
        for (int k = 0; k < cfg->n_rewards; k++)
            fprintf(out, "%s%s.weight", k ? ", " : "", cfg->rewards[k].section);
        fprintf(out, "): the reward is 0 for every completion and nothing is learnt\n");
        n++;
    }
    return n;
}

grpo_config grpo_reward_spec_config(const grpo_reward_spec *spec) {
    grpo_config c = {(uint32_t)sizeof(grpo_config), spec->n, (const char *const *)spec->keys,
                     (const char *const *)spec->values, spec->section, spec->dir};
    return c;
}

char *grpo_run_config_input_path(const grpo_run_config *cfg, const char *value) {
    return grpo_path_beside(cfg->path, value);
}

/* ---- writing INI back ------------------------------------------------------------------- */

/* Whether v survives a trip through inih: no line ends, no whitespace at either end, no ';'
 * after whitespace (that would start a comment). */
static int value_writable(const char *v) {
    size_t n = strlen(v);
    if (n && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]))) return 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\n' || v[i] == '\r') return 0;
        if (v[i] == ';' && i && isspace((unsigned char)v[i - 1])) return 0;
    }
    return 1;
}

/* Writes "key = value", splitting a value too long for one line over indented continuation lines
 * (joined with nothing on reading: split only between two non-blank characters, and never in
 * front of ';' or '#', which would start a comment line). mark is appended as a comment when it
 * fits, else written on a comment line before. Returns 0, or -1 when v cannot be written. */
static int write_kv(FILE *out, const char *key, const char *v, const char *mark) {
    enum { MAX = GRPO_INI_MAX_LINE_CHARS, INDENT = 4 };
    if (!value_writable(v)) return -1;
    /* "key =value" when the value starts with ';': "key = ;x" would make it a comment. */
    const char *eq = (v[0] == ';' || !v[0]) ? " =" : " = ";
    size_t head = strlen(key) + strlen(eq), n = strlen(v);
    size_t markw = mark ? strlen(mark) + 2 : 0;
    if (head + n <= MAX) {
        if (mark && head + n + markw > MAX) fprintf(out, "; %s\n", mark);
        int w = fprintf(out, "%s%s%s", key, eq, v);
        if (mark && head + n + markw <= MAX) {
            int pad = w < 40 ? 40 - w : 1;
            if (head + n + (size_t)pad + strlen(mark) + 2 > MAX) pad = 1;
            fprintf(out, "%*s; %s", pad, "", mark);
        }
        fputc('\n', out);
        return 0;
    }
    if (head >= MAX) return -1;
    if (mark) fprintf(out, "; %s\n", mark);
    size_t pos = 0, room = MAX - head;
    fprintf(out, "%s%s", key, eq);
    while (pos < n) {
        size_t take = n - pos <= room ? n - pos : room;
        /* Back off until the cut lies between two non-blank characters, not before ';'/'#'. */
        while (pos + take < n && take > 0 &&
               (isspace((unsigned char)v[pos + take - 1]) || isspace((unsigned char)v[pos + take]) ||
                v[pos + take] == ';' || v[pos + take] == '#'))
            take--;
        if (take == 0) return -1;
        fprintf(out, "%.*s\n", (int)take, v + pos);
        pos += take;
        if (pos < n) fprintf(out, "%*s", INDENT, "");
        room = MAX - INDENT;
    }
    return 0;
}

/* Shortest text that reads back as exactly x. */
static void format_double(double x, char *buf, size_t n) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return; /* buf: our own "%g" text, a number */
    }
}

/* The dump's comment for a value set at line: none from the file, "from --set", or unset's. */
static const char *set_mark(int line, const char *unset) {
    return line > 0 ? NULL : line < 0 ? "from --set" : unset;
}

int grpo_run_config_visit(const grpo_run_config *cfg, grpo_run_config_fn fn, void *ctx) {
    int bad = 0;
    for (int sec = 0; sec < N_SECTIONS; sec++) {
        for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
            const grpo_run_key *k = &key_table[i];
            if (strcmp(k->section, section_names[sec]) != 0) continue;
            char mark[96] = "";
            if (cfg->line[i] < 0) snprintf(mark, sizeof mark, "from --set");
            if (!cfg->line[i]) {
                if (k->def[0] == '@') snprintf(mark, sizeof mark, "default: = %s", k->def + 1);
                else snprintf(mark, sizeof mark, "default");
            }
            bad |= fn(ctx, k->section, k->name, cfg->text[i] ? cfg->text[i] : "",
                      mark[0] ? mark : NULL, k->flags);
        }
        const grpo_reward_spec *env = &cfg->env; /* [env]'s plugin keys follow the host's */
        for (uint32_t j = 0; !strcmp(section_names[sec], "env") && j < env->n; j++)
            bad |= fn(ctx, "env", env->keys[j], env->values[j],
                      set_mark(env->lines[j], "default (manifest)"), 0);
    }
    for (int i = 0; i < cfg->n_rewards; i++) {
        const grpo_reward_spec *r = &cfg->rewards[i];
        char w[40];
        format_double(r->weight, w, sizeof w);
        bad |= fn(ctx, r->section, "plugin", r->plugin ? r->plugin : "", NULL, 0);
        bad |= fn(ctx, r->section, "weight", w, set_mark(r->weight_line, "default"), 0);
        bad |= fn(ctx, r->section, "isolate", r->isolate ? "true" : "false",
                  set_mark(r->isolate_line, "default"), 0);
        char t[40];
        format_double(r->timeout, t, sizeof t);
        bad |= fn(ctx, r->section, "timeout", t, set_mark(r->timeout_line, "default"), 0);
        char wk[24];
        snprintf(wk, sizeof wk, "%d", (int)r->workers);
        bad |= fn(ctx, r->section, "workers", wk, set_mark(r->workers_line, "default"), 0);
        bad |= fn(ctx, r->section, "rows_independent", r->rows_independent ? "true" : "false",
                  set_mark(r->rows_independent_line, "default (manifest)"), 0);
        for (uint32_t j = 0; j < r->n; j++)
            if (strcmp(r->keys[j], "timeout") != 0) /* the host's, visited above */
                bad |= fn(ctx, r->section, r->keys[j], r->values[j],
                          set_mark(r->lines[j], "default (manifest)"), 0);
    }
    return bad;
}

/* The dump's writer: a "[section]" line where the section changes, then the key. */
typedef struct dump_ctx {
    FILE *out;
    const char *section;
} dump_ctx;

static int dump_one(void *ctx, const char *section, const char *key, const char *value,
                    const char *mark, unsigned flags) {
    (void)flags;
    dump_ctx *d = ctx;
    if (!d->section || strcmp(d->section, section) != 0) fprintf(d->out, "\n[%s]\n", section);
    d->section = section;
    return write_kv(d->out, key, value, mark);
}

int grpo_run_config_dump(const grpo_run_config *cfg, FILE *out) {
    fprintf(out, "; The resolved configuration of %s.\n", cfg->path ? cfg->path : "(defaults)");
    fprintf(out, "; \"; default\" marks a key the file does not set, \"; from --set\" one the "
                 "command line set.\n; `grpo config keys` says what "
                 "each key means.\n; Relative input paths are relative to the directory of that "
                 "file.\n");
    dump_ctx d = {out, NULL};
    int bad = grpo_run_config_visit(cfg, dump_one, &d);
    return bad || ferror(out) ? -1 : 0;
}

void grpo_run_config_document(FILE *out) {
    fprintf(out, "; Every key of a grpo run file, with its type and default. This text is itself a "
                 "run file:\n; copy it, set [model] path and [data] path, add a reward, and "
                 "delete what you keep at default.\n");
    for (int sec = 0; sec < N_SECTIONS; sec++) {
        fprintf(out, "\n[%s]\n", section_names[sec]);
        for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
            const grpo_run_key *k = &key_table[i];
            if (strcmp(k->section, section_names[sec]) != 0) continue;
            char what[160];
            if (k->choices) {
                int len = snprintf(what, sizeof what, "one of ");
                for (int c = 0; k->choices[c]; c++)
                    len += snprintf(what + len, sizeof what - (size_t)len, "%s%s", c ? ", " : "",
                                    k->choices[c]);
            } else if (k->type == GRPO_KEY_INT || k->type == GRPO_KEY_FLOAT) {
                range_describe(k, what, sizeof what);
            } else {
                snprintf(what, sizeof what, "%s", k->type == GRPO_KEY_BOOL ? "true or false"
                                                  : (k->flags & GRPO_KEY_DIR) ? "a directory"
                                                  : (k->flags & GRPO_KEY_FILE) ? "a file"
                                                                               : "text");
            }
            fprintf(out, "; %s%s: %s\n", what,
                    (k->flags & GRPO_KEY_REQUIRED) ? ", required to train" : "", k->help);
            if (k->def[0] == '@')
                fprintf(out, "; %s = (default: the value of %s)\n", k->name, k->def + 1);
            else
                write_kv(out, k->name, k->def, NULL);
        }
    }
    fprintf(out, "\n; One section per reward; r = sum of weight * reward. The plugin's own keys "
                 "follow\n; (`grpo plugins list` shows them). For example:\n"
                 "; [reward.fmt]\n; plugin = builtin.format\n; weight = 1.0\n"
                 "; isolate = false  ; true: score in a worker process, so a crash, exit()\n"
                 ";                  ; or hang in the plugin gives NaN for that batch\n"
                 ";                  ; instead of ending the run\n"
                 "; timeout = 60     ; seconds one score call may take (builtin.exec: its\n"
                 ";                  ; exchange); past it an isolated worker is killed\n"
                 ";                  ; (NaN), else the run ends\n"
                 "; workers = 1      ; calls that may score at once, while the batch still\n"
                 ";                  ; decodes (isolated or per-instance plugins: processes)\n"
                 "; rows_independent ; (default: the manifest's) true: a row's score needs no\n"
                 ";                  ; other row, so each row is scored as it ends; false:\n"
                 ";                  ; a group's rows are scored together\n");
}
