# train_misbehave: a GRPO run with rewards from tests/packs/misbehave (issue 20). A reward that is
# NaN for every sample is warned of once and logged as rewards/NAME/nan_frac = 1; a reward that
# aborts at step 3 takes the run down with one line naming the plugin, pack, library, step and
# batch, and the checkpoints written before (steps 1 and 2) resume.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME train_misbehave COMMAND ${CMAKE_COMMAND} -DGRPO=$<TARGET_FILE:grpo_cli>
    -DSRC=${PROJECT_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/train_misbehave
    -DMISBEHAVE=${CMAKE_CURRENT_BINARY_DIR}/plugins/misbehave
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(train_misbehave PROPERTIES TIMEOUT 300)
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{GRPO_PLUGIN_PATH} "")
function(fail what)
  message(FATAL_ERROR "train_misbehave: ${what}")
endfunction()

execute_process(COMMAND ${GRPO} init-model policy --hidden 32 --layers 1 --heads 2 --kv-heads 1
  --intermediate 64 WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("init-model: exit ${rc}\n${err}")
endif()
# AFTER: mb.abort's score calls before it aborts (one per step here: grad_accum = 1)
function(write_run AFTER)
  file(WRITE ${WORK_DIR}/run.ini "[model]\npath = policy\n"
    "[data]\npath = ${SRC}/examples/arith/train.jsonl\nmax_prompt_length = 32\n"
    "[sampling]\nnum_generations = 4\nmax_completion_length = 8\n"
    "[train]\nsteps = 4\nbatch_prompts = 2\nthreads = 1\n"
    "[log]\ndir = run\n[checkpoint]\ndir = run/checkpoints\nevery = 1\nkeep = 10\n"
    "[reward.ones]\nplugin = mb.ones\n[reward.silent]\nplugin = mb.nan\n"
    "[reward.bomb]\nplugin = mb.abort\nafter = ${AFTER}\n")
endfunction()

write_run(2)
execute_process(COMMAND ${GRPO} train run.ini --plugin-path ${MISBEHAVE}
  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  fail("a run whose reward aborts at step 3 exited 0\n${err}")
endif()
set(want "fatal: plugin mb.abort (pack mb, library ${MISBEHAVE}/libtp-misbehave.so, section [reward.bomb]) died of SIGABRT (abort) during score at step 3, batch 1; checkpoints already written are intact")
string(FIND "${err}" "${want}" at)
if(at LESS 0)
  fail("no crash report naming the plugin (exit ${rc}); expected\n${want}\nin\n${err}")
endif()
string(REGEX MATCHALL "returned NaN \\(no opinion\\) for all" nan_warnings "${err}")
list(LENGTH nan_warnings n)
if(NOT n EQUAL 1)
  fail("expected one warning for the all-NaN reward, got ${n}:\n${err}")
endif()
string(FIND "${err}" "warning: step 1: [reward.silent] (plugin mb.nan) returned NaN" at)
if(at LESS 0)
  fail("the NaN warning does not name step 1 and [reward.silent]:\n${err}")
endif()
file(STRINGS ${WORK_DIR}/run/metrics.jsonl lines)
list(LENGTH lines n)
if(NOT n EQUAL 2)
  fail("expected 2 metrics lines before the crash, got ${n}")
endif()
foreach(line ${lines})
  if(NOT line MATCHES "\"rewards/silent/nan_frac\": 1[,}]" OR
     NOT line MATCHES "\"rewards/ones/nan_frac\": 0[,}]")
    fail("no rewards/silent/nan_frac = 1 and rewards/ones/nan_frac = 0 in: ${line}")
  endif()
endforeach()

# the checkpoint of step 2 is whole: the run resumes from it and finishes, the bomb defused
# (a change the resume must be told about)
write_run(0)
execute_process(COMMAND ${GRPO} train run.ini --resume --allow-change reward.bomb.after
  --plugin-path ${MISBEHAVE}
  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("resume after the crash: exit ${rc}\n${err}")
endif()
file(STRINGS ${WORK_DIR}/run/metrics.jsonl lines)
list(GET lines -1 last)
if(NOT last MATCHES "^{\"step\": 4[,}]")
  fail("the resumed run did not reach step 4: ${last}")
endif()
message(STATUS "train_misbehave: NaN reward warned once and measured; crash at step 3 named; resumed from step 2")
