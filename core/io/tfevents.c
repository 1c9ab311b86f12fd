/* tfevents.c — TensorBoard event files (see tfevents.h). */
#include "io/tfevents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"

/* ---- CRC32C (Castagnoli, reflected polynomial 0x82f63b78), as TFRecord frames use it ------- */

static uint32_t crc32c(const unsigned char *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static uint32_t masked_crc(const unsigned char *p, size_t n) {
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- a protobuf message being built ------------------------------------------------------- */

typedef struct pb {
    unsigned char *b;
    size_t n, cap;
    int oom;
} pb;

static void pb_put(pb *m, const void *p, size_t k) {
    if (m->oom || k == 0) return; /* an empty message has no bytes (and maybe no buffer) */
    if (m->n + k > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->n + k) cap *= 2;
        unsigned char *b = realloc(m->b, cap);
        if (!b) {
            m->oom = 1;
            return;
        }
        m->b = b, m->cap = cap;
    }
    memcpy(m->b + m->n, p, k);
    m->n += k;
}

static void pb_varint(pb *m, uint64_t v) {
    unsigned char b[10];
    size_t k = 0;
    do b[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)), v >>= 7;
    while (v);
    pb_put(m, b, k);
}

/* wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
static void pb_key(pb *m, unsigned field, unsigned wire) { pb_varint(m, field << 3 | wire); }

static void pb_bytes(pb *m, unsigned field, const void *p, size_t k) {
    pb_key(m, field, 2), pb_varint(m, k), pb_put(m, p, k);
}

static void pb_string(pb *m, unsigned field, const char *s) { pb_bytes(m, field, s, strlen(s)); }

/* A nested message: its bytes, then freed. */
static void pb_message(pb *m, unsigned field, pb *sub) {
    m->oom |= sub->oom;
    pb_bytes(m, field, sub->b, sub->n);
    free(sub->b);
}

static void pb_double(pb *m, unsigned field, double v) { /* little-endian host */
    pb_key(m, field, 1), pb_put(m, &v, 8);
}

static void pb_float(pb *m, unsigned field, float v) { pb_key(m, field, 5), pb_put(m, &v, 4); }

/* ---- events ------------------------------------------------------------------------------- */

/* Event { wall_time = 1; step = 2 (omitted when 0, as proto3 does); then what fill adds }. */
static void event_begin(pb *e, double wall_time, long step) {
    memset(e, 0, sizeof *e);
    pb_double(e, 1, wall_time);
    if (step) pb_key(e, 2, 0), pb_varint(e, (uint64_t)step);
}

/* Frames event e as one TFRecord, writes and flushes it. */
static int write_record(grpo_tfevents *w, pb *e, grpo_error *err) {
    int rc = GRPO_OK;
    if (e->oom) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", w->path);
    unsigned char head[12];
    uint64_t len = e->n;
    memcpy(head, &len, 8);
    uint32_t c = masked_crc(head, 8), d = rc == GRPO_OK ? masked_crc(e->b, e->n) : 0;
    memcpy(head + 8, &c, 4);
    if (rc == GRPO_OK && (fwrite(head, 1, 12, w->f) != 12 || fwrite(e->b, 1, e->n, w->f) != e->n ||
                          fwrite(&d, 1, 4, w->f) != 4 || fflush(w->f) != 0))
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    free(e->b);
    return rc;
}

int grpo_tfevents_open(grpo_tfevents *w, const char *dir, double wall_time, long resume_step,
                       grpo_error *err) {
    char host[256] = "localhost", name[512];
    gethostname(host, sizeof host - 1);
    snprintf(name, sizeof name, "events.out.tfevents.%ld.%s.grpo", (long)wall_time, host);
    w->f = NULL;
    int rc = grpo_path_join(w->path, sizeof w->path, dir, name, err);
    if (rc != GRPO_OK) return rc;
    if (!(w->f = fopen(w->path, "wbe")))
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", w->path,
                              strerror(errno));
    pb e;
    event_begin(&e, wall_time, 0);
    pb_string(&e, 3, "brain.Event:2");
    if ((rc = write_record(w, &e, err)) != GRPO_OK || resume_step < 0) return rc;
    pb log = {0}; /* SessionLog { status = 1: START } */
    pb_key(&log, 1, 0), pb_varint(&log, 1);
    event_begin(&e, wall_time, resume_step);
    pb_message(&e, 7, &log);
    return write_record(w, &e, err);
}

int grpo_tfevents_scalars(grpo_tfevents *w, double wall_time, long step, const char *const *tags,
                          const double *values, int n, grpo_error *err) {
    pb summary = {0}, e;
    for (int i = 0; i < n; i++) {
        pb value = {0};
        pb_string(&value, 1, tags[i]);
        pb_float(&value, 2, (float)values[i]);
        pb_message(&summary, 1, &value);
    }
    event_begin(&e, wall_time, step);
    pb_message(&e, 5, &summary);
    return write_record(w, &e, err);
}

int grpo_tfevents_text(grpo_tfevents *w, double wall_time, long step, const char *tag,
                       const char *text, grpo_error *err) {
    pb tensor = {0}, shape = {0}, plugin = {0}, meta = {0}, value = {0}, summary = {0}, e;
    pb_key(&tensor, 1, 0), pb_varint(&tensor, 7); /* dtype: DT_STRING */
    pb_message(&tensor, 2, &shape);                /* tensor_shape: [] (a scalar) */
    pb_string(&tensor, 8, text);                   /* string_val */
    pb_string(&plugin, 1, "text");                 /* PluginData.plugin_name */
    pb_message(&meta, 1, &plugin);                 /* SummaryMetadata.plugin_data */
    pb_string(&value, 1, tag);
    pb_message(&value, 8, &tensor);
    pb_message(&value, 9, &meta);
    pb_message(&summary, 1, &value);
    event_begin(&e, wall_time, step);
    pb_message(&e, 5, &summary);
    return write_record(w, &e, err);
}

int grpo_tfevents_close(grpo_tfevents *w, grpo_error *err) {
    if (!w->f) return GRPO_OK;
    int bad = fclose(w->f) != 0;
    w->f = NULL;
    return bad ? grpo_error_set(err, GRPO_ERR_IO, "%s: close failed: %s", w->path,
                                strerror(errno))
               : GRPO_OK;
}
