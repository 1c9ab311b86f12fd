/*
 * reward_serve.h — the worker side of an isolated reward (reward_worker.h describes the
 * exchange): a process started as `grpo __reward-worker` with its socket to the trainer. It opens
 * its own process context (the trainer's packs, backend and threads), creates the one reward of
 * the setup in process and scores each batch it is sent, until the socket closes.
 */
#ifndef GRPO_REWARD_SERVE_H
#define GRPO_REWARD_SERVE_H

/* Serves the trainer on fd; returns the process's exit status (0 after a clean end). */
int grpo_reward_worker_main(int fd);

#endif
