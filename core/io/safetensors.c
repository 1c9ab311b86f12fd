/* safetensors.c — validated reader (mmap, single file or sharded index) and atomic writer of
 * Hugging Face .safetensors files. See safetensors.h for the format and the rules checked. */
#include "io/safetensors.h"
#include "io/testing.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_MAX_HEADER (100u << 20) /* the reference library refuses larger headers too */
#define ST_MAX_EXACT_INT 9007199254740992.0 /* 2^53: JSON numbers above are not exact doubles */

/* ---- dtypes ------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_table[GRPO_ST_DTYPE_COUNT] = {
    [GRPO_ST_F32] = {"F32", 4},   [GRPO_ST_F16] = {"F16", 2},  [GRPO_ST_BF16] = {"BF16", 2},
    [GRPO_ST_F64] = {"F64", 8},   [GRPO_ST_I64] = {"I64", 8},  [GRPO_ST_I32] = {"I32", 4},
    [GRPO_ST_I16] = {"I16", 2},   [GRPO_ST_I8] = {"I8", 1},    [GRPO_ST_U64] = {"U64", 8},
    [GRPO_ST_U32] = {"U32", 4},   [GRPO_ST_U16] = {"U16", 2},  [GRPO_ST_U8] = {"U8", 1},
    [GRPO_ST_BOOL] = {"BOOL", 1}, [GRPO_ST_F8_E4M3] = {"F8_E4M3", 1},
    [GRPO_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *grpo_st_dtype_name(grpo_st_dtype t) {
    return (unsigned)t < GRPO_ST_DTYPE_COUNT ? dtype_table[t].name : "?";
}

/* Bytes per element. */
static size_t grpo_st_dtype_size(grpo_st_dtype t) {
    return (unsigned)t < GRPO_ST_DTYPE_COUNT ? dtype_table[t].size : 0;
}

/* Parses a header dtype string; returns -1 when it is not a safetensors dtype. */
static int grpo_st_dtype_parse(const char *name) {
    for (int t = 0; t < GRPO_ST_DTYPE_COUNT; t++)
        if (strcmp(name, dtype_table[t].name) == 0) return t;
    return -1;
}

/* ---- exact fp conversions ----------------------------------------------------------------- */

static float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float grpo_bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

float grpo_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN payload */
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in fp32 (10-bit integer times a power of 2) */
        float v = (float)man * 0x1p-24f;
        return bits_to_f32(sign | f32_to_bits(v));
    }
    return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13)); /* rebias 15 -> 127 */
}

uint16_t grpo_f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* out[n] = widen(the n little-endian 16-bit words at p). */
static void widen_16(float *out, const unsigned char *p, uint64_t n, float (*widen)(uint16_t)) {
    for (uint64_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, p + 2 * i, 2);
        out[i] = widen(w);
    }
}

/* Converts n elements of a tensor's raw data (dtype F32, F16 or BF16) to fp32. */
static int grpo_st_convert_f32(float *out, const void *data, grpo_st_dtype dtype, uint64_t n,
                               grpo_error *err) {
    const unsigned char *p = data;
    switch (dtype) {
    case GRPO_ST_F32:
        memcpy(out, p, n * 4);
        return GRPO_OK;
    case GRPO_ST_BF16: widen_16(out, p, n, grpo_bf16_to_f32); return GRPO_OK;
    case GRPO_ST_F16: widen_16(out, p, n, grpo_f16_to_f32); return GRPO_OK;
    default:
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "dtype %s cannot be converted to fp32 (supported: F32, F16, BF16)",
                              grpo_st_dtype_name(dtype));
    }
}

/* ---- the open checkpoint ------------------------------------------------------------------ */

typedef struct st_file {
    char *path;
    void *map;   /* size bytes, PROT_READ, or NULL for an empty file */
    size_t size;
} st_file;

struct grpo_safetensors {
    char *path;            /* what grpo_st_open was given (file or index) */
    st_file *files;        /* [n_files] */
    size_t n_files;
    grpo_st_tensor *t;     /* [n], sorted by name after open */
    size_t n, cap;
    cJSON *metadata;       /* "__metadata__" object of the first file, or NULL */
};

void grpo_st_close(grpo_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_files; i++) {
        if (st->files[i].map) munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    for (size_t i = 0; i < st->n; i++) free((char *)st->t[i].name);
    free(st->files);
    free(st->t);
    cJSON_Delete(st->metadata);
    free(st->path);
    free(st);
}

size_t grpo_st_count(const grpo_safetensors *st) { return st->n; }
size_t grpo_st_n_files(const grpo_safetensors *st) { return st->n_files; }

const grpo_st_tensor *grpo_st_at(const grpo_safetensors *st, size_t i) {
    return i < st->n ? &st->t[i] : NULL;
}

static int tensor_cmp_name(const void *a, const void *b) {
    return strcmp(((const grpo_st_tensor *)a)->name, ((const grpo_st_tensor *)b)->name);
}

const grpo_st_tensor *grpo_st_find(const grpo_safetensors *st, const char *name) {
    grpo_st_tensor key = {.name = name};
    if (st->n == 0) return NULL; /* st->t is NULL: bsearch must not see it */
    return bsearch(&key, st->t, st->n, sizeof *st->t, tensor_cmp_name);
}

const char *grpo_st_metadata(const grpo_safetensors *st, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Writes "[a, b, c]" into buf. */
static const char *format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* ---- header parsing ----------------------------------------------------------------------- */

/* A JSON number that is an exact non-negative integer (<= 2^53) -> *out. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= ST_MAX_EXACT_INT) || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static grpo_st_tensor *push_tensor(grpo_safetensors *st) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 64;
        grpo_st_tensor *t = realloc(st->t, cap * sizeof *t);
        if (!t) return NULL;
        st->t = t, st->cap = cap;
    }
    grpo_st_tensor *t = &st->t[st->n++];
    memset(t, 0, sizeof *t);
    return t;
}

/* Parses one tensor entry {"dtype","shape","data_offsets"} into t; data_len is the size of the
 * file's data section, data its start. */
static int parse_tensor(grpo_st_tensor *t, const cJSON *e, const char *file,
                        const unsigned char *data, uint64_t data_len, grpo_error *err) {
    const char *name = t->name;
    if (!cJSON_IsObject(e))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': expected an object with dtype, shape and "
                              "data_offsets", file, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s': missing string \"dtype\"",
                              file, name);
    int dtype = grpo_st_dtype_parse(dt->valuestring);
    if (dtype < 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': unknown dtype '%.40s' (expected F32, F16, BF16, "
                              "F64, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3 or F8_E5M2)",
                              file, name, dt->valuestring);
    t->dtype = (grpo_st_dtype)dtype;
    if (!cJSON_IsArray(sh))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s': missing array \"shape\"",
                              file, name);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > GRPO_ST_MAX_DIMS)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: tensor '%s': %d dimensions, at most %d supported", file, name,
                              ndim, GRPO_ST_MAX_DIMS);
    t->ndim = ndim;
    uint64_t numel = 1;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_uint(x, &v) || v > INT64_MAX)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor '%s': shape[%d] is not a non-negative integer",
                                  file, name, d);
        t->shape[d] = (int64_t)v;
        if (__builtin_mul_overflow(numel, v, &numel))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor '%s': shape product overflows 64 bits", file, name);
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)grpo_st_dtype_size(t->dtype), &nbytes))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': byte size overflows 64 bits", file, name);
    t->numel = numel, t->nbytes = nbytes;
    uint64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &b) ||
        !json_uint(off->child->next, &en))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': \"data_offsets\" must be [begin, end] with "
                              "non-negative integers", file, name);
    if (b > en)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                              "] has begin > end", file, name, b, en);
    if (en > data_len)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                              "] end beyond the data section of %" PRIu64
                              " bytes (truncated file?)", file, name, b, en, data_len);
    if (en - b != nbytes) {
        char s[256];
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %"
                              PRIu64 " bytes, expected %" PRIu64 " for %s %s", file, name, b, en,
                              en - b, nbytes, grpo_st_dtype_name(t->dtype),
                              format_shape(s, sizeof s, t->ndim, t->shape));
    }
    t->data = data + b;
    t->begin = b;
    return GRPO_OK;
}

typedef struct span {
    uint64_t begin, end;
    size_t tensor;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks that the tensors [first, st->n) of one file do not share bytes. */
static int check_overlaps(const grpo_safetensors *st, size_t first, const char *file,
                          grpo_error *err) {
    size_t n = st->n - first;
    if (n < 2) return GRPO_OK;
    span *s = malloc(n * sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < n; i++) {
        const grpo_st_tensor *t = &st->t[first + i];
        s[i] = (span){t->begin, t->begin + t->nbytes, first + i};
    }
    qsort(s, n, sizeof *s, span_cmp);
    int rc = GRPO_OK;
    size_t prev = SIZE_MAX;
    for (size_t i = 0; i < n && rc == GRPO_OK; i++) {
        if (s[i].begin == s[i].end) continue; /* empty tensors own no bytes */
        if (prev != SIZE_MAX && s[prev].end > s[i].begin)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: tensors '%s' and '%s' overlap in the data section (each "
                                "tensor needs its own bytes)", file, st->t[s[prev].tensor].name,
                                st->t[s[i].tensor].name);
        prev = i;
    }
    free(s);
    return rc;
}

/* Maps path read-only into f. */
static int map_file(st_file *f, const char *path, grpo_error *err) {
    f->path = strdup(path);
    if (!f->path) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open: %s", path,
                                      strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: not a regular file", path);
    }
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            close(fd);
            return grpo_error_set(err, GRPO_ERR_IO, "%s: mmap failed: %s", path,
                                  strerror(errno));
        }
    }
    close(fd);
    return GRPO_OK;
}

/* "__metadata__" must map strings to strings. */
static int metadata_ok(const cJSON *m) {
    if (!cJSON_IsObject(m)) return 0;
    for (const cJSON *kv = m->child; kv; kv = kv->next)
        if (!cJSON_IsString(kv)) return 0;
    return 1;
}

/* Validates the header of the mapped file f and appends its tensors to st. */
static int parse_header(grpo_safetensors *st, st_file *f, grpo_error *err) {
    const char *file = f->path;
    const unsigned char *m = f->map;
    if (f->size < 8)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: file is %zu bytes, shorter than the 8-byte header length "
                              "(truncated or not a safetensors file)", file, f->size);
    uint64_t hlen;
    memcpy(&hlen, m, 8);
    if (hlen > f->size - 8)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: header length %" PRIu64 " exceeds the %zu bytes after the "
                              "length field (truncated or not a safetensors file)", file, hlen,
                              f->size - 8);
    if (hlen > ST_MAX_HEADER || hlen < 2)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: header length %" PRIu64 " outside [2, %u] bytes", file, hlen,
                              ST_MAX_HEADER);
    const char *h = (const char *)m + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!root)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: header is not valid JSON (near byte %td of %" PRIu64 ")",
                              file, end ? end - h : (ptrdiff_t)0, hlen);
    for (const char *p = end; p < h + hlen; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            cJSON_Delete(root);
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: header has bytes after its JSON object (at byte %td; "
                                  "only space padding expected)", file, p - h);
        }
    int rc = GRPO_OK;
    if (!cJSON_IsObject(root))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: header JSON is not an object", file);
    const unsigned char *data = m + 8 + hlen;
    uint64_t data_len = f->size - 8 - hlen;
    size_t first = st->n;
    for (cJSON *e = rc ? NULL : root->child; e && rc == GRPO_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!metadata_ok(e)) {
                rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                    "%s: __metadata__ must be an object of strings", file);
                break;
            }
            if (!st->metadata) st->metadata = cJSON_Duplicate(e, 1);
            continue;
        }
        if (!e->string[0]) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: a tensor has an empty name", file);
            break;
        }
        grpo_st_tensor *t = push_tensor(st);
        char *name = t ? strdup(e->string) : NULL;
        if (!name) {
            if (t) st->n--;
            rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", file);
            break;
        }
        t->name = name;
        t->file = f->path;
        rc = parse_tensor(t, e, file, data, data_len, err);
    }
    cJSON_Delete(root);
    if (rc == GRPO_OK) rc = check_overlaps(st, first, file, err);
    return rc;
}

static int add_file(grpo_safetensors *st, const char *path, grpo_error *err) {
    st_file *files = realloc(st->files, (st->n_files + 1) * sizeof *files);
    if (!files) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    st->files = files;
    st_file *f = &st->files[st->n_files++];
    memset(f, 0, sizeof *f);
    int rc = map_file(f, path, err);
    return rc ? rc : parse_header(st, f, err);
}

/* Sorts by name; a name twice (in one file or two shards) is an error. */
static int sort_and_check_unique(grpo_safetensors *st, grpo_error *err) {
    if (st->n < 2) return GRPO_OK; /* a file of only __metadata__ has st->t == NULL */
    qsort(st->t, st->n, sizeof *st->t, tensor_cmp_name);
    for (size_t i = 1; i < st->n; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor '%s' appears twice (in %s and %s)", st->path,
                                  st->t[i].name, st->t[i - 1].file, st->t[i].file);
    return GRPO_OK;
}

/* ---- sharded checkpoints ------------------------------------------------------------------ */

/* Path of a shard named in an index: relative to the index's directory, no "..", not absolute. */
static int shard_path(char *out, size_t cap, const char *index, const char *shard,
                      grpo_error *err) {
    if (!shard[0] || shard[0] == '/' || strstr(shard, ".."))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: shard '%s' must be a file name relative to the index", index,
                              shard);
    const char *slash = strrchr(index, '/');
    int dir_len = slash ? (int)(slash - index + 1) : 0;
    if (snprintf(out, cap, "%.*s%s", dir_len, index, shard) >= (int)cap)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: shard path too long", index);
    return GRPO_OK;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Prepends "what: " to the message in err (errors inside a shard also name the index). */
static void prefix_error(grpo_error *err, const char *what) {
    if (!err) return;
    char msg[sizeof err->message];
    snprintf(msg, sizeof msg, "%s", err->message);
    grpo_error_set(err, err->status, "%s: %s", what, msg);
}

static int open_index(grpo_safetensors *st, const char *path, grpo_error *err) {
    char *text = NULL;
    size_t len = 0;
    int rc = grpo_read_file(path, &text, &len, err);
    if (rc) return rc;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: expected a JSON object with a \"weight_map\" object", path);
    }
    char sp[4096];
    /* open each distinct shard once (sorted names: model-00001-of-N first) */
    int n_map = cJSON_GetArraySize(map);
    const char **shards = malloc((size_t)(n_map ? n_map : 1) * sizeof *shards);
    if (!shards) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    int n_shards = 0;
    for (const cJSON *e = map->child; e && rc == GRPO_OK; e = e->next) {
        if (!cJSON_IsString(e))
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: weight_map['%s'] must be a shard file name", path, e->string);
        else
            shards[n_shards++] = e->valuestring;
    }
    if (rc == GRPO_OK) qsort(shards, (size_t)n_shards, sizeof *shards, str_cmp);
    for (int i = 0; i < n_shards && rc == GRPO_OK; i++) {
        if (i > 0 && strcmp(shards[i], shards[i - 1]) == 0) continue;
        rc = shard_path(sp, sizeof sp, path, shards[i], err);
        if (rc == GRPO_OK && (rc = add_file(st, sp, err)) != GRPO_OK) prefix_error(err, path);
    }
    free(shards);
    if (rc == GRPO_OK && st->n_files == 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: weight_map is empty", path);
    if (rc == GRPO_OK) rc = sort_and_check_unique(st, err);
    /* every mapped tensor must be in the shard the map names */
    for (const cJSON *e = map->child; e && rc == GRPO_OK; e = e->next) {
        const grpo_st_tensor *t = grpo_st_find(st, e->string);
        rc = shard_path(sp, sizeof sp, path, e->valuestring, err);
        if (rc == GRPO_OK && !t)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: tensor '%s' is missing from shard %s named by weight_map",
                                path, e->string, sp);
        else if (rc == GRPO_OK && strcmp(t->file, sp) != 0)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: tensor '%s' is in %s, but weight_map says %s", path,
                                e->string, t->file, sp);
    }
    cJSON_Delete(root);
    return rc;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Names come from the file: a control character in one must not break the one-line message. */
static int one_line(grpo_error *err, int rc) {
    for (char *p = err ? err->message : NULL; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return rc;
}

int grpo_st_open(grpo_safetensors **out, const char *path, grpo_error *err) {
    *out = NULL;
    grpo_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    }
    int rc;
    if (ends_with(path, ".json")) {
        rc = open_index(st, path, err);
    } else {
        rc = add_file(st, path, err);
        if (rc == GRPO_OK) rc = sort_and_check_unique(st, err);
    }
    if (rc != GRPO_OK) {
        grpo_st_close(st);
        return one_line(err, rc);
    }
    *out = st;
    return GRPO_OK;
}

/* Drops the mapped pages that lie wholly inside [p, p + n) from this process's memory once they
 * are copied out: a model's load then peaks at its weights plus a slice, not plus the whole
 * file. The mapping is private, read-only and never written, so a later read of the same bytes
 * (a tied weight read twice) faults them back in from the file. */
static void release_pages(const void *p, uint64_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p;
    uintptr_t lo = (a + page - 1) / page * page, hi = (a + n) / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* t's elements into out, a slice of RELEASE_SLICE elements at a time, each slice's mapped pages
 * released after it (release_pages). */
enum { RELEASE_SLICE = 1 << 22 };
static int convert_releasing(float *out, const grpo_st_tensor *t, grpo_error *err) {
    uint64_t size = t->nbytes / (t->numel ? t->numel : 1);
    for (uint64_t k = 0; k < t->numel; k += RELEASE_SLICE) {
        uint64_t n = t->numel - k < RELEASE_SLICE ? t->numel - k : RELEASE_SLICE;
        const char *src = (const char *)t->data + k * size;
        int rc = grpo_st_convert_f32(out + k, src, t->dtype, n, err);
        if (rc != GRPO_OK) return rc;
        release_pages(src, n * size);
    }
    return GRPO_OK;
}

static int read_f32(const grpo_safetensors *st, const char *name, float *out, int ndim,
                    const int64_t *shape, grpo_error *err) {
    const grpo_st_tensor *t = grpo_st_find(st, name);
    char want[256], got[256];
    if (!t)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: tensor '%s' not found (expected shape %s; the checkpoint has "
                              "%zu tensors)", st->path, name,
                              format_shape(want, sizeof want, ndim, shape), st->n);
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s' has shape %s, expected %s",
                              t->file, name, format_shape(got, sizeof got, t->ndim, t->shape),
                              format_shape(want, sizeof want, ndim, shape));
    if (t->dtype != GRPO_ST_F32 && t->dtype != GRPO_ST_F16 && t->dtype != GRPO_ST_BF16)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 can be "
                              "loaded", t->file, name, grpo_st_dtype_name(t->dtype));
    return convert_releasing(out, t, err);
}

int grpo_st_read_f32(const grpo_safetensors *st, const char *name, float *out, int ndim,
                     const int64_t *shape, grpo_error *err) {
    return one_line(err, read_f32(st, name, out, ndim, shape, err));
}

/* ---- writer ------------------------------------------------------------------------------- */

static int check_unique_names(const char *path, const grpo_st_out *t, size_t n, grpo_error *err) {
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) names[i] = t[i].name;
    qsort(names, n, sizeof *names, str_cmp);
    int rc = GRPO_OK;
    for (size_t i = 1; i < n && rc == GRPO_OK; i++)
        if (strcmp(names[i], names[i - 1]) == 0)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s' given twice", path,
                                names[i]);
    free(names);
    return rc;
}

/* Checks the tensors to write; *numel_out[i] receives product(shape). */
static int check_outputs(const char *path, const grpo_st_out *t, size_t n, uint64_t *numel,
                         grpo_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name || !t[i].name[0] || !strcmp(t[i].name, "__metadata__"))
            return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor %zu has no valid name",
                                  path, i);
        if (t[i].ndim < 0 || t[i].ndim > GRPO_ST_MAX_DIMS)
            return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s': ndim %d outside [0, %d]",
                                  path, t[i].name, t[i].ndim, GRPO_ST_MAX_DIMS);
        uint64_t ne = 1;
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0 || __builtin_mul_overflow(ne, (uint64_t)t[i].shape[d], &ne) ||
                ne > (UINT64_MAX >> 3))
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "%s: tensor '%s': invalid shape", path, t[i].name);
        if (ne > 0 && !t[i].data && !t[i].fill)
            return grpo_error_set(err, GRPO_ERR_INVALID, "%s: tensor '%s': data and fill are "
                                  "NULL", path, t[i].name);
        numel[i] = ne;
    }
    return check_unique_names(path, t, n, err);
}

/* A JSON array of n integers, written exactly (cJSON prints numbers as doubles). */
static cJSON *int_array(const int64_t *v, int n) {
    char text[GRPO_ST_MAX_DIMS * 24 + 2] = "[";
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%" PRId64, i ? "," : "", v[i]);
    snprintf(text + len, sizeof text - len, "]");
    return cJSON_CreateRaw(text);
}

/* The header JSON (*out, malloc'd, *len bytes), padded with spaces to a multiple of 8 bytes. */
static int build_header(char **out, size_t *len, const grpo_st_out *t, size_t n,
                        const uint64_t *numel, grpo_st_dtype dtype) {
    size_t es = grpo_st_dtype_size(dtype);
    int64_t off[2] = {0, 0};
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "__metadata__");
    int ok = cJSON_AddStringToObject(meta, "format", "pt") != NULL; /* any failure: no header */
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        off[1] = off[0] + (int64_t)(numel[i] * es);
        ok = cJSON_AddStringToObject(e, "dtype", grpo_st_dtype_name(dtype)) &&
             cJSON_AddItemToObject(e, "shape", int_array(t[i].shape, t[i].ndim)) &&
             cJSON_AddItemToObject(e, "data_offsets", int_array(off, 2));
        off[0] = off[1];
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    size_t k = text ? strlen(text) : 0, padded = (k + 7) & ~(size_t)7;
    *out = text ? realloc(text, padded + 1) : NULL;
    if (!*out) return free(text), GRPO_ERR_NOMEM;
    memset(*out + k, ' ', padded - k);
    (*out)[padded] = '\0';
    *len = padded;
    return GRPO_OK;
}

static int write_tensor_data(grpo_atomic_file *af, const float *x, uint64_t n,
                             grpo_st_dtype dtype, grpo_error *err) {
    if (dtype == GRPO_ST_F32) return grpo_atomic_write(af, x, n * 4, err);
    uint16_t buf[8192]; /* BF16, converted in chunks */
    for (uint64_t i = 0; i < n;) {
        size_t k = n - i < 8192 ? (size_t)(n - i) : 8192;
        for (size_t j = 0; j < k; j++) buf[j] = grpo_f32_to_bf16(x[i + j]);
        int rc = grpo_atomic_write(af, buf, k * 2, err);
        if (rc) return rc;
        i += k;
    }
    return GRPO_OK;
}

/* The floats of the largest tensor written through fill (0 without). */
static uint64_t fill_floats(const grpo_st_out *t, size_t n, const uint64_t *numel) {
    uint64_t most = 0;
    for (size_t i = 0; i < n; i++)
        if (!t[i].data && numel[i] > most) most = numel[i];
    return most;
}

/* Tensor t's data (numel floats): its own, or fill's into buf. */
static int tensor_data(const grpo_st_out *t, uint64_t numel, float *buf, const float **x,
                       grpo_error *err) {
    *x = t->data ? t->data : buf;
    return t->data || !numel ? GRPO_OK : t->fill(t->ctx, t->key, buf, err);
}

/* The file's bytes after its header: every tensor's data, in order. */
static int write_data(grpo_atomic_file *af, const char *path, const grpo_st_out *t, size_t n,
                      const uint64_t *numel, grpo_st_dtype dtype, grpo_error *err) {
    uint64_t most = fill_floats(t, n, numel);
    float *buf = most ? malloc(most * sizeof(float)) : NULL;
    if (most && !buf)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory for a tensor of %llu "
                              "floats", path, (unsigned long long)most);
    int rc = GRPO_OK;
    for (size_t i = 0; i < n && rc == GRPO_OK; i++) {
        const float *x;
        rc = tensor_data(&t[i], numel[i], buf, &x, err);
        if (rc == GRPO_OK) rc = write_tensor_data(af, x, numel[i], dtype, err);
    }
    free(buf);
    return rc;
}

int grpo_st_write(const char *path, const grpo_st_out *tensors, size_t n, grpo_st_dtype dtype,
                  grpo_error *err) {
    if (dtype != GRPO_ST_F32 && dtype != GRPO_ST_BF16)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: writing dtype %s is not supported (F32 or BF16)", path,
                              grpo_st_dtype_name(dtype));
    uint64_t *numel = malloc((n ? n : 1) * sizeof *numel);
    if (!numel) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    char *hdr = NULL;
    size_t hdr_len = 0;
    int rc = check_outputs(path, tensors, n, numel, err);
    if (rc == GRPO_OK && build_header(&hdr, &hdr_len, tensors, n, numel, dtype) != GRPO_OK)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    grpo_atomic_file af = {0};
    if (rc == GRPO_OK) rc = grpo_atomic_open(&af, path, err);
    if (rc == GRPO_OK) {
        uint64_t hlen = hdr_len; /* little-endian host: the bytes are the on-disk form */
        rc = grpo_atomic_write(&af, &hlen, 8, err);
        if (rc == GRPO_OK) rc = grpo_atomic_write(&af, hdr, hdr_len, err);
        if (rc == GRPO_OK) rc = write_data(&af, path, tensors, n, numel, dtype, err);
        if (rc == GRPO_OK) rc = grpo_atomic_commit(&af, err);
        else grpo_atomic_abort(&af);
    }
    free(hdr);
    free(numel);
    return rc;
}
