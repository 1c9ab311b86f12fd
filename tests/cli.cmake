# Command-line tests run as scripts (tests/cli/*.sh) against the built grpo binary.
# tokenize_json: `grpo tokenize --json` against Hugging Face tokenizers on multi-line texts.
add_test(NAME cli_tokenize_json
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/tokenize_json.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
# options: an option that does not apply to the chosen mode (or is unknown) is refused with exit 2
# and a message naming it, in every subcommand (one table in tests/cli/options.sh).
add_test(NAME cli_options
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/options.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
# report: `grpo report` writes one escaped, balanced HTML page of a run.
add_test(NAME cli_report COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/report.sh $<TARGET_FILE:grpo_cli>)
# the same page in headless Chromium (scripts/test.sh installs Debian's chromium; skipped without)
add_test(NAME cli_report_browser
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/report.sh $<TARGET_FILE:grpo_cli> --browser)
set_tests_properties(cli_report_browser PROPERTIES SKIP_RETURN_CODE 77)
# model_fallback: a model pack that cannot be loaded does not stop a model another pack serves.
add_test(NAME cli_model_fallback
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/model_fallback.sh $<TARGET_FILE:grpo_cli>)
# oom: under a memory limit an allocation that does not fit names its buffer and size (exit 1).
add_test(NAME cli_oom_names_the_buffer
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/oom.sh $<TARGET_FILE:grpo_cli> ${GRPO_SANITIZE})
# eval_adapter: `grpo eval RUN.ini --adapter CHECKPOINT` on a LoRA run's own checkpoint puts the
# adapter on model.path and names it in its output.
add_test(NAME cli_eval_adapter
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/eval_adapter.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
# http_reward: builtin.http rewards (exec and judge mode, and a dead endpoint) in `grpo train`
# against tests/http_server/server.py on 127.0.0.1; the API key never reaches a file or the log.
add_test(NAME cli_http_reward
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/http_reward.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
# judge_example: examples/judge.ini's judge against examples/judge-server/judge_server.py.
add_test(NAME cli_judge_example
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/judge_example.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
# code_sandbox: builtin.code runs completions' code under bubblewrap: hostile programs (fork bomb,
# 10 GB, endless loop, socket, writes and reads outside, 1 GB of output) score 0 with the host
# unharmed; both test formats score the fraction passed. Skipped (77), saying so, where the kernel
# refuses user namespaces.
add_test(NAME cli_code_sandbox
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/code_sandbox.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_code_sandbox PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# logprobs_batch: `grpo logprobs` prints the same bits at --batch 1, 7 and 4 on 2 threads.
add_test(NAME cli_logprobs_batch_invariant
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/logprobs_batch.sh $<TARGET_FILE:grpo_cli>)
# reward_overlap: rewards scored while the batch decodes (workers = 1, 4, isolated) give the bytes
# of scoring after the batch, and their calls really began before the batch's last row ended.
add_test(NAME cli_reward_overlap
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/reward_overlap.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/plugins/misbehave)
set_tests_properties(cli_reward_overlap PROPERTIES TIMEOUT 300)
# blas_core: on a CPU with AVX2 and FMA grpo runs OpenBLAS kernels built on them, even where
# OpenBLAS took the CPU for an older one (kernels/cpu/blas_core.c); a user's OPENBLAS_CORETYPE
# is kept.
add_test(NAME cli_blas_core
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/blas_core.sh $<TARGET_FILE:grpo_cli>)
