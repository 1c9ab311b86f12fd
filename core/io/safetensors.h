/*
 * safetensors.h — Hugging Face .safetensors files in and out.
 *
 * File layout (https://huggingface.co/docs/safetensors): 8-byte little-endian header length N,
 * N bytes of JSON {"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}},
 * then the data section; offsets are relative to the start of the data section (byte 8 + N).
 *
 * Reading: grpo_st_open() maps a file (or every shard of a model.safetensors.index.json)
 * read-only and validates the whole header before it returns: header length within the file,
 * valid JSON, every tensor with a known dtype, a shape without overflow, data_offsets in range
 * with begin <= end and end - begin == product(shape) * dtype size, no two tensors overlapping,
 * no name twice. Nothing is copied until a tensor is read: grpo_st_read_f32() converts one
 * tensor (F32, F16 or BF16, exactly) into a caller buffer after checking the caller's shape.
 *
 * Writing: grpo_st_write() writes named fp32 tensors as F32 or BF16 with __metadata__
 * {"format":"pt"}, atomically (temp file in the same directory, fsync, rename, fsync dir): a
 * failure at any point leaves the previous file untouched.
 *
 * Errors: every function that can fail returns GRPO_OK or a negative GRPO_ERR_* status and writes
 * one line into err naming the file, the tensor and what was expected. Host must be little-endian.
 *
 * Threads: an open grpo_safetensors is never modified after grpo_st_open(), so the lookup and read
 * functions may run concurrently. The files are mapped, not copied: one truncated by another
 * process while open makes later reads fault (SIGBUS), as with any mmap reader.
 *
 * Typical host use (shapes are the model's, e.g. from grpo_param_desc):
 *   grpo_safetensors *st;  grpo_hf_open_weights(dir, &st, err)      -- hfdir.h
 *   for each param p:      grpo_st_read_f32(st, p.name, params[i], p.ndim, p.shape, err)
 *   grpo_st_close(st);
 *   save:                  grpo_hf_save(dir, config, outs, n, GRPO_ST_BF16, &tokenizer_files, err)
 */
#ifndef GRPO_SAFETENSORS_H
#define GRPO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/plugin.h"

#define GRPO_ST_MAX_DIMS 8 /* more dimensions than this is an error */

/* Dtypes of the safetensors format. Only F32, F16 and BF16 can be read as fp32; the others are
 * recognised (so their sizes are validated and `grpo model info` can list them) but
 * grpo_st_read_f32() refuses them with an error naming the tensor and the dtype. */
typedef enum grpo_st_dtype {
    GRPO_ST_F32 = 0,
    GRPO_ST_F16,
    GRPO_ST_BF16,
    GRPO_ST_F64,
    GRPO_ST_I64,
    GRPO_ST_I32,
    GRPO_ST_I16,
    GRPO_ST_I8,
    GRPO_ST_U64,
    GRPO_ST_U32,
    GRPO_ST_U16,
    GRPO_ST_U8,
    GRPO_ST_BOOL,
    GRPO_ST_F8_E4M3,
    GRPO_ST_F8_E5M2,
    GRPO_ST_DTYPE_COUNT
} grpo_st_dtype;

/* "F32", "BF16", ... as written in the header. */
const char *grpo_st_dtype_name(grpo_st_dtype t);

/* One tensor of an open file. Owned by the grpo_safetensors it came from; valid until
 * grpo_st_close(). */
typedef struct grpo_st_tensor {
    const char *name;               /* e.g. "model.embed_tokens.weight" */
    grpo_st_dtype dtype;
    int ndim;                       /* 0..GRPO_ST_MAX_DIMS (0 = scalar, one element) */
    int64_t shape[GRPO_ST_MAX_DIMS];
    uint64_t numel;                 /* product(shape) */
    uint64_t nbytes;                /* numel * dtype size */
    uint64_t begin;                 /* data_offsets[0]: offset in its file's data section */
    const void *data;               /* nbytes bytes inside the read-only mapping (unaligned) */
    const char *file;               /* path of the file (shard) that holds it */
} grpo_st_tensor;

/* An open checkpoint: one .safetensors file, or all shards of an index. Opaque. */
typedef struct grpo_safetensors grpo_safetensors;

/* Opens path: a .safetensors file, or a model.safetensors.index.json whose "weight_map" names
 * the shard of every tensor (shards are looked up relative to the index's directory; each tensor
 * must be in the shard the map names). Validates everything (see top). On success *out owns the
 * mappings; the caller MUST grpo_st_close() it. On failure *out is NULL and err says why. */
int grpo_st_open(grpo_safetensors **out, const char *path, grpo_error *err);
void grpo_st_close(grpo_safetensors *st); /* NULL is fine */

/* Tensors in name order: i in [0, grpo_st_count()). */
size_t grpo_st_count(const grpo_safetensors *st);
const grpo_st_tensor *grpo_st_at(const grpo_safetensors *st, size_t i);
/* The tensor called name, or NULL. O(log n). */
const grpo_st_tensor *grpo_st_find(const grpo_safetensors *st, const char *name);
/* Number of files mapped (1, or the number of shards). */
size_t grpo_st_n_files(const grpo_safetensors *st);

/* Reads tensor name as fp32 into out (numel floats, caller-owned). The tensor must exist and
 * have exactly the shape (ndim, shape[ndim]) the caller expects; else an error naming the file,
 * the tensor, the expected and the actual shape. F16 and BF16 convert exactly (subnormals, inf,
 * NaN included). */
int grpo_st_read_f32(const grpo_safetensors *st, const char *name, float *out, int ndim,
                     const int64_t *shape, grpo_error *err);

/* ---- writing ----------------------------------------------------------------------------- */

/* One tensor to write: borrowed fp32 data of product(shape) floats, or (data NULL) fill, which
 * puts them in buf when the writer reaches the tensor: a caller whose tensors are not fp32 host
 * arrays (a device's, bf16, another layout) hands them over one at a time, and the writer holds
 * the floats of one tensor (the largest such), not of all. */
typedef struct grpo_st_out {
    const char *name;
    const float *data;
    int ndim;                       /* 0..GRPO_ST_MAX_DIMS */
    int64_t shape[GRPO_ST_MAX_DIMS];
    int (*fill)(void *ctx, uint64_t key, float *buf, grpo_error *err); /* GRPO_OK or an error */
    void *ctx;                      /* fill's, with key */
    uint64_t key;
} grpo_st_out;

/* Writes the n tensors, in the given order, to path as dtype (GRPO_ST_F32 or GRPO_ST_BF16), with
 * __metadata__ {"format":"pt"} and the header padded with spaces to a multiple of 8 bytes, so the
 * data section (and every F32 tensor) starts 8-byte aligned. Atomic: path is either the previous
 * file or the complete new one. Names must be unique and non-empty. */
int grpo_st_write(const char *path, const grpo_st_out *tensors, size_t n, grpo_st_dtype dtype,
                  grpo_error *err);

#endif
