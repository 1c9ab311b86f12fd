# train_reward_mix: a run file mixing builtin.format, builtin.tags, reward_model.score and
# builtin.accuracy trains (issue 7): grpo init-model makes a tiny policy, the tiny Llama reward
# model fixture scores its completions with its own tokenizer, and every step logs a finite
# rewards/rm/mean next to the rule rewards. Then the same run from a copy of grpo that has no
# packs beside it: the reward model must load through the run's --plugin-path (the run's own
# model services), not the process default context that knows only the default plugin path.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME train_reward_mix COMMAND ${CMAKE_COMMAND} -DGRPO=$<TARGET_FILE:grpo_cli>
    -DSRC=${PROJECT_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/train_reward_mix
    -DPACKS=${GRPO_PACK_OUTPUT_DIR}
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(train_reward_mix PROPERTIES TIMEOUT 300)
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(grpo_run what)
  execute_process(COMMAND ${GRPO} ${ARGN} WORKING_DIRECTORY ${WORK_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_reward_mix: ${what}: exit ${rc}\n${out}\n${err}")
  endif()
endfunction()

grpo_run("init-model" init-model policy --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64)
file(WRITE ${WORK_DIR}/mix.ini "[model]\npath = policy\n"
  "[data]\npath = ${SRC}/examples/arith/train.jsonl\nmax_prompt_length = 32\n"
  "[sampling]\nnum_generations = 4\nmax_completion_length = 16\n"
  "[train]\nsteps = 2\nbatch_prompts = 2\nthreads = 1\n"
  "[log]\ndir = run\n[checkpoint]\ndir = run/checkpoints\nevery = 0\n"
  "[reward.format]\nplugin = builtin.format\n[reward.tags]\nplugin = builtin.tags\n"
  "[reward.rm]\nplugin = reward_model.score\nmodel = ${SRC}/tests/fixtures/reward_model/llama\n"
  "text = minimind\nclip = 3\n[reward.accuracy]\nplugin = builtin.accuracy\n")
grpo_run("train" train mix.ini)
file(STRINGS ${WORK_DIR}/run/metrics.jsonl lines)
list(LENGTH lines n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "train_reward_mix: expected 2 metrics lines, got ${n}")
endif()
foreach(line ${lines})
  foreach(name format tags rm accuracy)
    if(NOT line MATCHES "\"rewards/${name}/mean\": -?[0-9]")
      message(FATAL_ERROR "train_reward_mix: no finite rewards/${name}/mean in: ${line}")
    endif()
  endforeach()
endforeach()
message(STATUS "train_reward_mix: 2 GRPO steps with format + tags + reward model + accuracy")

set(ENV{GRPO_PLUGIN_PATH} "")
file(COPY ${GRPO} DESTINATION ${WORK_DIR}/bare)
get_filename_component(name ${GRPO} NAME)
set(GRPO ${WORK_DIR}/bare/${name})
grpo_run("train from a grpo without packs beside it" train mix.ini --plugin-path ${PACKS}
         --set log.dir=run2) # a new run: a log.dir of its own
message(STATUS "train_reward_mix: the reward model loaded through --plugin-path")
