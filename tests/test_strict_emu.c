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
 * The other direction, device work given host memory (which the emulation's kernels could read,
 * but a GPU cannot): a kernel launch with a host pointer argument, a download from a host
 * source, an upload to a host destination and a zero of host memory each stop the process with
 * a message naming the call and the address (run in a child whose stderr is read back); the
 * same op on the device buffer runs, so it is the pointer that is refused.
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

/* What a child that runs bad(o, dev, host) prints to stderr before it ends; 1 when it was
 * stopped by SIGABRT. */
static int aborts_saying(void (*bad)(grpo_ops *, float *, float *), char *said, size_t cap) {
    int fd[2];
    ck_assert(pipe(fd) == 0);
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2), close(fd[0]), close(fd[1]);
        float *dev, host[4] = {0};
        grpo_ops *o = open_with_buffer(&dev);
        bad(o, dev, host);
        _exit(0); /* not stopped: the parent's check fails */
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], said + n, cap - 1 - n)) > 0) n += (size_t)r;
    said[n] = 0;
    close(fd[0]);
    int status = 0;
    ck_assert(waitpid(pid, &status, 0) == pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void scale_host(grpo_ops *o, float *dev, float *host) {
    o->scale(o->ctx, dev, 2.0f, 4); /* the device buffer: runs */
    o->scale(o->ctx, host, 2.0f, 4);
}
static void download_from_host(grpo_ops *o, float *dev, float *host) {
    float back[4];
    o->download(o->ctx, back, dev, sizeof back);
    o->download(o->ctx, back, host, sizeof back);
}
static void upload_to_host(grpo_ops *o, float *dev, float *host) {
    const float v[4] = {1, 2, 3, 4};
    o->upload(o->ctx, dev, v, sizeof v);
    o->upload(o->ctx, host, v, sizeof v);
}
static void zero_host(grpo_ops *o, float *dev, float *host) {
    o->zero(o->ctx, dev, 4 * sizeof(float));
    o->zero(o->ctx, host, 4 * sizeof(float));
}
static void download_past_the_end(grpo_ops *o, float *dev, float *host) {
    (void)host;
    float back[128];
    o->download(o->ctx, back, dev, 256); /* cudaMalloc's 256 bytes: the whole allocation */
    o->download(o->ctx, back, dev + 1, 256);
}

static const struct {
    void (*bad)(grpo_ops *, float *, float *);
    const char *want[2];
} device_work_cases[] = {
    {scale_host, {"kernel scale_kernel: argument 0", "a host pointer passed to a device kernel"}},
    {download_from_host, {"cudaMemcpy (DeviceToHost) of 16 bytes: the source side",
                          "not device memory"}},
    {upload_to_host, {"cudaMemcpy (HostToDevice) of 16 bytes: the destination side",
                      "not device memory"}},
    {zero_host, {"cudaMemsetAsync", "not device memory"}},
    {download_past_the_end, {"256 bytes at", "run past the end of the device allocation of 256"}},
};

START_TEST(device_work_on_host_memory_stops_in_strict_mode) {
    char said[4096];
    int stopped = aborts_saying(device_work_cases[_i].bad, said, sizeof said);
    ck_assert_msg(stopped, "case %d: not stopped; it said: %s", _i, said);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(strstr(said, device_work_cases[_i].want[k]), "case %d: '%s' lacks '%s'", _i,
                      said, device_work_cases[_i].want[k]);
    ck_assert_msg(strstr(said, "0x"), "case %d: no address in '%s'", _i, said);
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
    tcase_add_loop_test(tc, device_work_on_host_memory_stops_in_strict_mode, 0,
                        (int)(sizeof device_work_cases / sizeof device_work_cases[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK); /* each case its own process (see the header) */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
