/* cmd_reward_worker.c — `grpo __reward-worker`, hidden: the process an isolated reward runs in
 * (train/reward_worker.h). The trainer starts it with the socket to it on stdin. */
#include <fcntl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "train/reward_serve.h"

int cmd_reward_worker(void) {
    int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return 1;
    /* stdin reads nothing; stdout is stderr, so nothing a plugin prints reaches the socket */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        return 1;
    close(null);
    return grpo_reward_worker_main(fd);
}
