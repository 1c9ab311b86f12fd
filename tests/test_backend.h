/*
 * test_backend.h — which backend a model test runs on: GRPO_TEST_BACKEND (default "cpu"). The
 * whole-model suites (test_dense, test_moe, test_lora) are registered a second time with
 * GRPO_TEST_BACKEND=cuda (tests/cuda.cmake): natively where a GPU is, and with
 * GRPO_CUDA_EMULATION=1 under the host emulation of kernels/cuda everywhere. A cuda backend that
 * cannot open here skips the suite with one line and exit 77 (ctest: skipped); the emulated one
 * is built with the project, so under CI=true it fails instead (tests/test_skip.h).
 */
#ifndef GRPO_TEST_BACKEND_H
#define GRPO_TEST_BACKEND_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "test_skip.h"

static inline const char *test_backend_name(void) {
    const char *b = getenv("GRPO_TEST_BACKEND");
    return b && b[0] ? b : "cpu";
}

/* The test backend with `threads` CPU threads, or NULL with err set. */
static inline grpo_ops *test_backend_open(int32_t threads, grpo_error *err) {
    return grpo_backend_open(test_backend_name(), threads, err);
}

/* Called first in main (outside Check's forked tests): exits 77 with one line when the test
 * backend cannot open here (1 under CI when it is the emulation), and says which backend the
 * suite runs on when it is not cpu. */
static inline void test_backend_require(void) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = test_backend_open(1, &err);
    const char *emu = getenv("GRPO_CUDA_EMULATION");
    if (!o) {
        char what[1200];
        snprintf(what, sizeof what, "backend %s not available here: %s", test_backend_name(),
                 err.message);
        if (emu && strcmp(emu, "1") == 0 && strcmp(test_backend_name(), "cpu") != 0)
            test_skip_or_fail(what);
        printf("SKIP: %s\n", what);
        exit(77);
    }
    if (strcmp(test_backend_name(), "cpu") != 0)
        printf("model suite on backend %s%s\n", test_backend_name(),
               emu && strcmp(emu, "1") == 0 ? " (host emulation, no GPU used)" : "");
    grpo_backend_close(o);
}

/* Backend memory is read and written through the op table only (on a GPU it is device memory;
 * the emulation's strict mode faults on a direct access, and stops device work given host
 * memory). The model API's arrays are backend memory too: tests/test_model_io.h. */

/* A malloc'd host copy of n floats at dev. */
static inline float *test_host_floats(const grpo_ops *o, const float *dev, uint64_t n) {
    float *h = malloc(n * sizeof(float) + 1);
    o->download(o->ctx, h, dev, n * sizeof(float));
    return h;
}

/* One float of backend memory: read, write. */
static inline float test_get(const grpo_ops *o, const float *dev) {
    float v;
    o->download(o->ctx, &v, dev, sizeof v);
    return v;
}
static inline void test_set(const grpo_ops *o, float *dev, float v) {
    o->upload(o->ctx, dev, &v, sizeof v);
}

#endif
