/* code_sandbox.c — one untrusted program under bubblewrap and rlimits (code_sandbox.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "code_harness.h"
#include "code_sandbox.h"
#include "exec_path.h"
#include "exec_proc.h" /* now_seconds, exec_attributes */

#define CODE_MAX_ARGS 80
#define CODE_NOBODY "65534" /* the unprivileged uid and gid inside the sandbox */
/* As root, each program runs as its own unprivileged uid and gid outside the sandbox:
 * CODE_UID_BASE + (grpo's pid mod 65536) * 1024 + (a counter mod 1024). RLIMIT_NPROC counts a
 * uid's processes machine-wide, so a fork bomb then starves neither the next program (whose
 * predecessor's processes may still be dying) nor a program of another grpo run. */
#define CODE_UID_BASE 0x40000000u

/* Appends one formatted argument; -1 when out of memory or room. */
static int push(code_sandbox *sb, const char *fmt, ...) {
    if (sb->argc + 1 >= CODE_MAX_ARGS) return -1;
    va_list ap;
    va_start(ap, fmt);
    char *a = NULL;
    int n = vasprintf(&a, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    sb->argv[sb->argc++] = a;
    return 0;
}

static int push_all(code_sandbox *sb, const char *const *args) {
    for (; *args; args++)
        if (push(sb, "%s", *args) != 0) return -1;
    return 0;
}

/* prlimit's limits: both soft and hard, so the program cannot raise them again. */
static int push_limits(code_sandbox *sb, const char *prlimit) {
    const code_limits *l = &sb->lim;
    return push(sb, "%s", prlimit) || push(sb, "--as=%lld", (long long)l->memory_mb << 20) ||
           push(sb, "--cpu=%d", l->cpu_s) ||
           push(sb, "--fsize=%lld", (long long)l->file_mb << 20) ||
           push(sb, "--nproc=%d", l->processes) || push(sb, "--core=0") || push(sb, "--");
}

/* bubblewrap: every namespace new, nothing of the host but /usr (and its merged-/usr links)
 * read-only, a read-only root, a private tmpfs as working directory, no environment but PATH, HOME
 * and LANG. */
static int push_bwrap(code_sandbox *sb, const char *bwrap) {
    static const char *const flags[] = {"--unshare-all",
                                        "--unshare-user",
                                        "--disable-userns",
                                        "--die-with-parent",
                                        "--new-session",
                                        "--cap-drop",
                                        "ALL",
                                        "--uid",
                                        CODE_NOBODY,
                                        "--gid",
                                        CODE_NOBODY,
                                        "--hostname",
                                        "sandbox",
                                        "--ro-bind",
                                        "/usr",
                                        "/usr",
                                        "--ro-bind-try",
                                        "/bin",
                                        "/bin",
                                        "--ro-bind-try",
                                        "/lib",
                                        "/lib",
                                        "--ro-bind-try",
                                        "/lib64",
                                        "/lib64",
                                        "--proc",
                                        "/proc",
                                        "--dev",
                                        "/dev",
                                        "--info-fd",
                                        "5",
                                        NULL};
    static const char *const env[] = {"--tmpfs",      "/tmp",
                                      "--remount-ro", "/",
                                      "--chdir",      "/tmp",
                                      "--clearenv",   "--setenv",
                                      "PATH",         "/usr/bin:/bin",
                                      "--setenv",     "HOME",
                                      "/tmp",         "--setenv",
                                      "LANG",         "C.UTF-8",
                                      "--",           NULL};
    return push(sb, "%s", bwrap) || push_all(sb, flags) || push(sb, "--size") ||
           push(sb, "%lld", 4 * ((long long)sb->lim.file_mb << 20)) || push_all(sb, env);
}

/* setpriv to the run's own uid and gid (filled in per run: spawn) with no supplementary groups. */
static int push_drop(code_sandbox *sb, const char *setpriv) {
    static const char *const drop[] = {"--reuid=U", "--regid=G", "--clear-groups", "--", NULL};
    if (push(sb, "%s", setpriv)) return -1;
    sb->uid_arg = sb->argc;
    return push_all(sb, drop);
}

/* A program found on PATH, or NULL with why saying what is missing and where it comes from. */
static char *find_tool(const char *name, const char *package, char *why, size_t why_size) {
    char cause[160];
    char *path = builtin_exec_resolve(name, NULL, cause, sizeof cause);
    if (!path)
        snprintf(why, why_size, "%s: %s (Debian package %s; scripts/setup.sh installs it)", name,
                 cause, package);
    return path;
}

/* The command line without the mode: [prlimit] [setpriv as root] [bwrap] python -c HARNESS. */
static int build_argv(code_sandbox *sb, const char *python, char *why, size_t why_size) {
    char *prlimit = find_tool("prlimit", "util-linux", why, why_size), *setpriv = NULL,
         *bwrap = NULL;
    int root = geteuid() == 0, rc = prlimit ? 0 : -1;
    if (rc == 0 && sb->isolate && root &&
        !(setpriv = find_tool("setpriv", "util-linux", why, why_size)))
        rc = -1;
    if (rc == 0 && sb->isolate && !(bwrap = find_tool("bwrap", "bubblewrap", why, why_size)))
        rc = -1;
    if (rc == 0) {
        if (push_limits(sb, prlimit) || (setpriv && push_drop(sb, setpriv)) ||
            (bwrap && push_bwrap(sb, bwrap)) || push(sb, "%s", python) || push(sb, "-I") ||
            push(sb, "-S") || push(sb, "-B") || push(sb, "-c") || push(sb, "%s", CODE_HARNESS_PY) ||
            push(sb, "mode"))
            rc = -1, snprintf(why, why_size, "out of memory");
    }
    free(prlimit), free(setpriv), free(bwrap);
    return rc;
}

/* fd moved to 10 or above (close-on-exec), out of the way of the child's 0..4. */
static int move_high(int fd) {
    if (fd < 0) return -1;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return high;
}

/* A memfd holding text, read from its start. */
static int memfd_with(const char *name, const char *text) {
    int fd = move_high(memfd_create(name, MFD_CLOEXEC));
    size_t len = strlen(text), off = 0;
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno != EINTR) return close(fd), -1;
        if (w > 0) off += (size_t)w;
    }
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) != 0) return close(fd), -1;
    return fd;
}

/* The child's descriptors: the socket as stdin and stdout, stderr to /dev/null (or the socket),
 * the solution as fd 3, the tests as fd 4, bwrap's --info-fd as 5, nothing else; its working
 * directory. */
static int child_files(const code_sandbox *sb, posix_spawn_file_actions_t *fa, const int fds[4],
                       int merge_stderr) {
    int rc = posix_spawn_file_actions_init(fa);
    if (rc) return rc;
    rc = posix_spawn_file_actions_adddup2(fa, fds[0], STDIN_FILENO);
    if (!rc) rc = posix_spawn_file_actions_adddup2(fa, fds[0], STDOUT_FILENO);
    if (!rc)
        rc = merge_stderr
                 ? posix_spawn_file_actions_adddup2(fa, fds[0], STDERR_FILENO)
                 : posix_spawn_file_actions_addopen(fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_adddup2(fa, fds[1], 3);
    if (!rc) rc = posix_spawn_file_actions_adddup2(fa, fds[2], 4);
    if (!rc && fds[3] >= 0) rc = posix_spawn_file_actions_adddup2(fa, fds[3], 5);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(fa, fds[3] >= 0 ? 6 : 5);
#endif /* elsewhere every descriptor of ours is close-on-exec */
    if (!rc) rc = posix_spawn_file_actions_addchdir_np(fa, sb->isolate ? "/" : sb->scratch);
    if (rc) posix_spawn_file_actions_destroy(fa);
    return rc;
}

/* Starts the command line with mode; 0 or an errno. */
static int spawn(const code_sandbox *sb, const char *mode, const int fds[4], int merge_stderr,
                 pid_t *pid) {
    char *args[CODE_MAX_ARGS + 1];
    memcpy(args, sb->argv, (sb->argc + 1) * sizeof *args);
    args[sb->argc - 1] = (char *)mode;
    static uint32_t runs;
    char uid[32], gid[32];
    if (sb->uid_arg) {
        uint32_t id = CODE_UID_BASE + ((uint32_t)getpid() % 65536u) * 1024u +
                      __atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED) % 1024u;
        snprintf(uid, sizeof uid, "--reuid=%u", id), snprintf(gid, sizeof gid, "--regid=%u", id);
        args[sb->uid_arg] = uid, args[sb->uid_arg + 1] = gid;
    }
    char *env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = child_files(sb, &fa, fds, merge_stderr);
    if (rc) return rc;
    if ((rc = exec_attributes(&at)) == 0) {
        rc = posix_spawn(pid, args[0], &fa, &at, args, env);
        posix_spawnattr_destroy(&at);
    }
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* Reads what the socket has into r, up to the cap; 1 at end of output, -1 past the cap. */
static int take_output(int fd, size_t cap, code_run *r, size_t *room) {
    if (r->len + 65536 > *room && *room < cap + 1) {
        size_t grow = *room * 2 < cap + 1 ? *room * 2 : cap + 1;
        char *b = realloc(r->out, grow + 1);
        if (!b) return -1;
        r->out = b, *room = grow;
    }
    ssize_t got = recv(fd, r->out + r->len, *room - r->len, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    if (got > 0) r->len += (size_t)got;
    return r->len > cap ? -1 : 0;
}

/* Feeds input and reads stdout until end of output, the cap or the deadline. */
static void pump(const code_sandbox *sb, int fd, const char *input, size_t in_len, double deadline,
                 code_run *r) {
    size_t sent = 0, cap = (size_t)sb->lim.output_kb << 10,
           room = 65536 < cap + 1 ? 65536 : cap + 1;
    if (!(r->out = malloc(room + 1))) return;
    if (!in_len) shutdown(fd, SHUT_WR);
    for (;;) {
        double left = deadline - now_seconds();
        if (left <= 0) {
            r->timed_out = 1;
            return;
        }
        struct pollfd p = {fd, (short)(POLLIN | (sent < in_len ? POLLOUT : 0)), 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        if ((p.revents & POLLOUT) && sent < in_len) {
            ssize_t w = send(fd, input + sent, in_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EINTR && errno != EAGAIN)
                sent = in_len; /* it stopped reading */
            if (sent == in_len) shutdown(fd, SHUT_WR);
        }
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int rc = take_output(fd, cap, r, &room);
        if (rc < 0) r->overflowed = 1;
        if (rc) return;
    }
}

/* The PID of bubblewrap's child, the sandbox's PID 1, from what bwrap wrote to its --info-fd
 * ({"child-pid": N, ...}); 0 when it has not said (yet). */
static pid_t sandbox_init_pid(int info_fd) {
    char buf[512];
    ssize_t got = info_fd >= 0 ? read(info_fd, buf, sizeof buf - 1) : -1;
    if (got <= 0) return 0;
    buf[got] = 0;
    const char *k = strstr(buf, "\"child-pid\":");
    long v = k ? strtol(k + 12, NULL, 10) : 0;
    return v > 1 ? (pid_t)v : 0;
}

/* The parent PID of pid, from /proc; -1 when unknown. */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *close_paren = strrchr(buf, ')');
    int ppid = -1;
    if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1) return -1;
    return (pid_t)ppid;
}

/* Kills the sandbox's PID 1, which takes every process of its PID namespace with it, and gives
 * bwrap (our child, pid) a grace second to see it go and exit: its exit then means they are all
 * gone and no longer count against RLIMIT_NPROC for the next program. The PID is pinned with a
 * pidfd and checked to be bwrap's child before the signal, so a reused PID is never hit. */
static void kill_sandbox(pid_t pid, int info_fd) {
    pid_t init = sandbox_init_pid(info_fd);
    int pidfd = init ? (int)syscall(SYS_pidfd_open, init, 0) : -1;
    if (pidfd < 0) return;
    if (parent_of(init) == pid) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
    double until = now_seconds() + 1.0;
    siginfo_t info;
    do {
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid)
            return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    } while (now_seconds() < until);
}

/* Waits for the program's exit until the deadline; a program that overran is killed with its
 * sandbox. Then the whole process group is killed (what it left behind too; the leader is still
 * unreaped, so the group id cannot have been reused) and the leader reaped. */
static void finish(pid_t pid, int info_fd, double deadline, code_run *r) {
    siginfo_t info;
    while (!r->timed_out && !r->overflowed) {
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid) break;
        if (now_seconds() >= deadline)
            r->timed_out = 1;
        else
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (r->timed_out || r->overflowed) kill_sandbox(pid, info_fd);
    kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!r->timed_out && !r->overflowed && WIFEXITED(status))
        r->exited = 1, r->exit_code = WEXITSTATUS(status);
}

/* Our ends of the channels (socket, bwrap's info pipe) and the child's (socket, solution,
 * tests, info pipe), all at fd 10 or above; 0 or an errno. The info pipe only with bwrap. */
static int open_channels(const code_sandbox *sb, const char *code, const char *tests, int ours[2],
                         int theirs[4]) {
    int sv[2], info[2] = {-1, -1};
    theirs[1] = memfd_with("solution", code), theirs[2] = memfd_with("tests", tests);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0)
        ours[0] = move_high(sv[0]), theirs[0] = move_high(sv[1]);
    if (sb->isolate && pipe2(info, O_CLOEXEC | O_NONBLOCK) == 0)
        ours[1] = move_high(info[0]), theirs[3] = move_high(info[1]);
    return ours[0] < 0 || theirs[0] < 0 || theirs[1] < 0 || theirs[2] < 0 ||
                   (sb->isolate && (ours[1] < 0 || theirs[3] < 0))
               ? EMFILE
               : 0;
}

int code_sandbox_run(const code_sandbox *sb, const char *mode, const char *code, const char *tests,
                     const char *input, size_t in_len, int merge_stderr, code_run *r, char *why,
                     size_t why_size) {
    memset(r, 0, sizeof *r);
    int ours[2] = {-1, -1}, theirs[4] = {-1, -1, -1, -1};
    pid_t pid = 0;
    int rc = open_channels(sb, code, tests, ours, theirs);
    if (!rc) rc = spawn(sb, mode, theirs, merge_stderr, &pid);
    for (int i = 0; i < 4; i++)
        if (theirs[i] >= 0) close(theirs[i]);
    if (!rc) {
        double deadline = now_seconds() + sb->lim.time_limit;
        pump(sb, ours[0], input, in_len, deadline, r);
        finish(pid, ours[1], deadline, r);
    }
    for (int i = 0; i < 2; i++)
        if (ours[i] >= 0) close(ours[i]);
    if (rc) return snprintf(why, why_size, "cannot start %s: %s", sb->argv[0], strerror(rc)), -1;
    if (!r->out) return snprintf(why, why_size, "out of memory"), -1;
    if (r->len > (size_t)sb->lim.output_kb << 10) r->len = (size_t)sb->lim.output_kb << 10;
    r->out[r->len] = 0;
    return 0;
}

/* A program that prints "ok" must run and print it: otherwise why holds what it printed (bwrap's
 * complaint about namespaces, a missing interpreter, ...). */
static int probe(code_sandbox *sb, char *why, size_t why_size) {
    code_run r;
    if (code_sandbox_run(sb, "io", "print('ok')\n", "", "", 0, 1, &r, why, why_size) != 0)
        return -1;
    int ok = r.exited && r.exit_code == 0 && !strcmp(r.out, "ok\n");
    if (!ok) {
        for (char *c = r.out; *c; c++)
            if (*c == '\n') *c = ' ';
        snprintf(why, why_size, "a probe program printing 'ok' %s %d: %.300s",
                 r.timed_out ? "timed out, exit code" : "failed, exit code",
                 r.exited ? r.exit_code : -1, r.len ? r.out : "(no output)");
    }
    free(r.out);
    return ok ? 0 : -1;
}

int code_sandbox_init(code_sandbox *sb, int isolate, const code_limits *lim, const char *python,
                      char *why, size_t why_size) {
    memset(sb, 0, sizeof *sb);
    sb->isolate = isolate, sb->lim = *lim;
    if (!(sb->argv = calloc(CODE_MAX_ARGS + 1, sizeof *sb->argv)))
        return snprintf(why, why_size, "out of memory"), -1;
    if (!isolate) {
        char tmpl[] = "/tmp/grpo-code-XXXXXX";
        if (!mkdtemp(tmpl) || !(sb->scratch = strdup(tmpl)))
            return snprintf(why, why_size, "cannot make a scratch directory: %s", strerror(errno)),
                   -1;
    }
    if (build_argv(sb, python, why, why_size) != 0) return -1;
    return probe(sb, why, why_size);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void code_sandbox_free(code_sandbox *sb) {
    for (uint32_t i = 0; sb->argv && i < sb->argc; i++) free(sb->argv[i]);
    free(sb->argv);
    if (sb->scratch) nftw(sb->scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    free(sb->scratch);
    memset(sb, 0, sizeof *sb);
}
