/*
 * test_strict_emu.c — the CUDA host emulation's strict mode (kernels/cuda/emu/emu.h,
 * GRPO_CUDA_EMU_STRICT=1) faults on a host read of device memory, as a GPU would: the *_emu
 * tests rely on it to show that host code (the packs, the host, the tests) never dereferences a
 * device pointer. Registered as test_strict_emu (tests/cuda.cmake) with GRPO_CUDA_EMULATION=1
 * and GRPO_CUDA_EMU_STRICT=1; run without them it refuses (exit 2), so the registration cannot
 * lose strict mode quietly. An emulated backend that cannot open is a skip outside CI and a
 * failure under CI (tests/test_skip.h).
 *
 * Each case opens the backend in its own forked Check process (the emulation reads the variable
 * once per process), allocates a buffer through the op table and uploads a known value:
 *   - strict: a direct host read of the buffer faults (caught with our own SIGSEGV handler and
 *     siglongjmp, so the test also holds under ASan), while download reads the value;
 *   - the control, GRPO_CUDA_EMU_STRICT=0 set before the open: the same read gives the value, so
 *     the pointer is valid host memory and only strict mode makes it fault.
 */
#include <check.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels.h"
#include "test_skip.h"

static sigjmp_buf fault_jump;
static void on_fault(int sig) { siglongjmp(fault_jump, sig); }

/* Reads *p on the host: 1 when it faulted (SIGSEGV or SIGBUS), else 0 with the value in *out. */
static int host_read_faults(const volatile float *p, float *out) {
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    int faulted = 0;
    if (sigsetjmp(fault_jump, 1) == 0) *out = *p; /* the host read of device memory */
    else faulted = 1;
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return faulted;
}

/* The emulated backend with 4 floats of device memory holding 1.5, 2.5, 3.5, 4.5. */
static grpo_ops *open_with_buffer(float **dev) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = grpo_backend_open("cuda", 1, &err);
    ck_assert_msg(o != NULL, "%s", err.message);
    const float host[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    *dev = o->alloc(o->ctx, sizeof host);
    ck_assert_ptr_nonnull(*dev);
    o->upload(o->ctx, *dev, host, sizeof host);
    o->sync(o->ctx);
    return o;
}

START_TEST(a_host_read_of_device_memory_faults_in_strict_mode) {
    float *dev, v = 0, back[4];
    grpo_ops *o = open_with_buffer(&dev);
    ck_assert_msg(host_read_faults(dev + 2, &v),
                  "strict mode: a host read of device memory gave %g instead of faulting", v);
    o->download(o->ctx, back, dev, sizeof back); /* the op table still reads it */
    ck_assert(back[2] == 3.5f);
    o->free(o->ctx, dev);
    grpo_backend_close(o);
}
END_TEST

START_TEST(without_strict_mode_the_same_read_gives_the_value) {
    setenv("GRPO_CUDA_EMU_STRICT", "0", 1);
    float *dev, v = 0;
    grpo_ops *o = open_with_buffer(&dev);
    ck_assert_msg(!host_read_faults(dev + 2, &v), "the read faulted without strict mode");
    ck_assert(v == 3.5f);
    o->free(o->ctx, dev);
    grpo_backend_close(o);
}
END_TEST

/* Strict mode and the emulation are asked for (exit 2 if not), and the backend opens (in a child:
 * this process must not have read the variable before the cases do): skip or fail if not. */
static void require_emulated_strict(void) {
    const char *emu = getenv("GRPO_CUDA_EMULATION"), *strict = getenv("GRPO_CUDA_EMU_STRICT");
    if (!emu || strcmp(emu, "1") || !strict || strcmp(strict, "1")) {
        fprintf(stderr, "test_strict_emu: needs GRPO_CUDA_EMULATION=1 GRPO_CUDA_EMU_STRICT=1\n");
        exit(2);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_ops *o = grpo_backend_open("cuda", 1, &err);
        if (!o) {
            char what[1200];
            snprintf(what, sizeof what, "cuda backend (emulation) not available: %s",
                     err.message);
            test_skip_or_fail(what);
        }
        grpo_backend_close(o);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "test_strict_emu: the availability probe failed\n");
        exit(1);
    }
    if (WEXITSTATUS(status) != 0) exit(WEXITSTATUS(status));
}

int main(void) {
    require_emulated_strict();
    Suite *s = suite_create("strict_emu");
    TCase *tc = tcase_create("strict");
    tcase_add_test(tc, a_host_read_of_device_memory_faults_in_strict_mode);
    tcase_add_test(tc, without_strict_mode_the_same_read_gives_the_value);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK); /* each case its own process (see the header) */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
