# The external test scorer for builtin.exec, and where test_rewards_exec finds it. The test also
# checks the program-path rule directly, so it compiles the pack's exec_path.c (plain libc).
add_executable(exec_scorer ${CMAKE_CURRENT_SOURCE_DIR}/exec_scorers/scorer.c)
target_link_libraries(exec_scorer PRIVATE PkgConfig::CJSON)
if(TARGET test_rewards_exec)
  target_compile_definitions(test_rewards_exec PRIVATE EXEC_SCORER="$<TARGET_FILE:exec_scorer>")
  target_sources(test_rewards_exec PRIVATE ${PROJECT_SOURCE_DIR}/plugins/rewards/builtin/exec_path.c)
  target_include_directories(test_rewards_exec PRIVATE ${PROJECT_SOURCE_DIR}/plugins/rewards/builtin)
  add_dependencies(test_rewards_exec exec_scorer)
endif()

# A relative `command` path is relative to the run file's directory (grpo_config.dir, ABI 1.2),
# whatever directory grpo runs in: the run file and bin/scorer live in a temp dir, grpo runs in /.
add_test(NAME exec_relative_command
         COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; mkdir $d/bin; \
cp '$<TARGET_FILE:exec_scorer>' $d/bin/scorer; \
printf '[reward.ext]\\nplugin = builtin.exec\\ncommand = bin/scorer\\ncommand = good\\n' > $d/run.ini; \
cd / && '$<TARGET_FILE:grpo_cli>' reward score --config $d/run.ini \
--input '${PROJECT_SOURCE_DIR}/examples/samples.jsonl' --plugin-path '${GRPO_PACK_OUTPUT_DIR}' \
| grep -q '\"ext\": 43'")

# The test environment program for builtin.exec_env (test_env).
add_executable(exec_env_program ${CMAKE_CURRENT_SOURCE_DIR}/exec_scorers/env_program.c)
target_link_libraries(exec_env_program PRIVATE PkgConfig::CJSON)
if(TARGET test_env)
  target_compile_definitions(test_env PRIVATE EXEC_ENV_PROGRAM="$<TARGET_FILE:exec_env_program>")
  add_dependencies(test_env exec_env_program)
endif()
