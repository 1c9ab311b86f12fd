# train_hang: nothing hangs (issue 33, item 2). Every reward kind has a per-call deadline, the
# reward section's `timeout`; each kind is run with a reward that never answers:
#  - in-process (mb.sleep, never returns from its 2nd call): the run ends at the deadline with an
#    error naming the plugin, section and deadline (exit 75), and the checkpoint of step 1 resumes;
#  - isolated (the same reward, isolate = true, train.threads = 2; it hangs on its 3rd call, the
#    first of step 2: an isolated reward is called once per group, 2 a step): its worker is
#    killed at the deadline, that step's rewards/hang/nan_frac is 1 with one warning, the next step's new
#    worker scores again and the run finishes;
#  - builtin.exec whose program (sleep) never replies: NaN batches, the run finishes;
#  - the reward-model scorer (reward_model.score) isolated at train.threads = 2, which a bare
#    fork() of the threaded trainer deadlocked: it scores finite rewards every step.
# Every run has a wall-clock limit, so a hang fails the test instead of stalling it.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME train_hang COMMAND ${CMAKE_COMMAND} -DGRPO=$<TARGET_FILE:grpo_cli>
    -DSRC=${PROJECT_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/train_hang
    -DMISBEHAVE=${CMAKE_CURRENT_BINARY_DIR}/plugins/misbehave
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(train_hang PROPERTIES TIMEOUT 300)
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{GRPO_PLUGIN_PATH} "")
function(fail what)
  message(FATAL_ERROR "train_hang: ${what}")
endfunction()

# grpo ARGN in WORK_DIR within 60 s; rc, out and err into the caller's scope
function(grpo)
  execute_process(COMMAND ${GRPO} ${ARGN} WORKING_DIRECTORY ${WORK_DIR} TIMEOUT 60
    RESULT_VARIABLE r OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(rc "${r}" PARENT_SCOPE)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

grpo(init-model policy --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64)
if(NOT rc EQUAL 0)
  fail("init-model: exit ${rc}\n${err}")
endif()

# A run of STEPS steps (one batch each) in log dir LOG with THREADS threads and REWARD's section.
function(write_run LOG STEPS THREADS REWARD)
  file(WRITE ${WORK_DIR}/${LOG}.ini "[model]\npath = policy\n"
    "[data]\npath = ${SRC}/examples/arith/train.jsonl\nmax_prompt_length = 32\n"
    "[sampling]\nnum_generations = 4\nmax_completion_length = 8\n"
    "[train]\nsteps = ${STEPS}\nbatch_prompts = 2\nthreads = ${THREADS}\n"
    "[log]\ndir = ${LOG}\n[checkpoint]\ndir = ${LOG}/checkpoints\nevery = 1\nkeep = 10\n"
    "[reward.ones]\nplugin = mb.ones\n${REWARD}")
endfunction()

# the value of "KEY": NUMBER in each line of LOG's metrics.jsonl, as a list
function(metric LOG KEY var)
  file(STRINGS ${WORK_DIR}/${LOG}/metrics.jsonl lines)
  set(values "")
  foreach(line ${lines})
    string(REGEX MATCH "\"${KEY}\": ([-0-9.e]+)" m "${line}")
    list(APPEND values "${CMAKE_MATCH_1}")
  endforeach()
  set(${var} "${values}" PARENT_SCOPE)
endfunction()

# ---- in-process: the run ends at the deadline, naming the plugin; step 1's checkpoint resumes
write_run(inproc 3 1 "[reward.hang]\nplugin = mb.sleep\nafter = 1\ntimeout = 1\n")
grpo(train inproc.ini --plugin-path ${MISBEHAVE})
if(NOT rc EQUAL 75)
  fail("an in-process reward that hangs at step 2: expected exit 75, got ${rc}\n${err}")
endif()
set(want "error: plugin mb.sleep (section [reward.hang]) did not return from score within timeout = 1 s; an in-process call cannot be stopped safely, so the run ends")
string(FIND "${err}" "${want}" at)
if(at LESS 0)
  fail("no error naming the plugin and its deadline; expected\n${want}\nin\n${err}")
endif()
write_run(inproc 3 1 "[reward.hang]\nplugin = mb.sleep\nafter = 100\ntimeout = 1\n")
grpo(train inproc.ini --resume --allow-change reward.hang.after --plugin-path ${MISBEHAVE})
if(NOT rc EQUAL 0)
  fail("resume from the checkpoint of step 1 after the deadline: exit ${rc}\n${err}")
endif()
metric(inproc step steps)
if(NOT steps STREQUAL "1;2;3")
  fail("the resumed in-process run logged steps '${steps}', expected 1;2;3")
endif()
message(STATUS "train_hang: in-process hang ended the run at its deadline (exit 75); resumed")

# a plugin that declares a timeout of its own keeps it itself; the host's deadline is a backstop at
# 10 x the value, for one that fails to (mb.sleep_own ignores it)
file(WRITE ${WORK_DIR}/own.ini "[reward.own]\nplugin = mb.sleep_own\ntimeout = 0.2\n")
file(WRITE ${WORK_DIR}/one.jsonl "{\"prompt\": \"p\", \"completion\": \"c\"}\n")
grpo(reward score --config own.ini --input one.jsonl --plugin-path ${MISBEHAVE})
set(want "error: plugin mb.sleep_own (section [reward.own]) did not return from score within 2 s (a backstop at 10 x its timeout = 0.2 s, which the plugin keeps itself)")
string(FIND "${err}" "${want}" at)
if(NOT rc EQUAL 75 OR at LESS 0)
  fail("a plugin with its own timeout that hangs: exit ${rc}; expected 75 and\n${want}\nin\n${err}")
endif()

# ---- isolated at threads = 2: killed at the deadline, that step NaN, the run goes on
write_run(iso 3 2 "[reward.hang]\nplugin = mb.sleep\nafter = 2\ntimeout = 1\nisolate = true\n")
grpo(train iso.ini --plugin-path ${MISBEHAVE})
if(NOT rc EQUAL 0)
  fail("an isolated reward that hangs at step 2: exit ${rc}\n${err}")
endif()
string(REGEX MATCHALL "did not answer within timeout = 1 s and was killed" kills "${err}")
list(LENGTH kills n)
if(NOT n EQUAL 1)
  fail("expected one warning for the killed worker, got ${n}:\n${err}")
endif()
metric(iso "rewards/hang/nan_frac" nan)
if(NOT nan STREQUAL "0;1;0")
  fail("rewards/hang/nan_frac by step: '${nan}', expected 0;1;0 (a new worker at step 3)")
endif()
message(STATUS "train_hang: isolated hang killed at its deadline, step 2 NaN, run finished")

# ---- builtin.exec whose program never replies: NaN, the run goes on
write_run(exec 2 1 "[reward.slow]\nplugin = builtin.exec\ncommand = sleep\ncommand = 1000\ntimeout = 1\n")
grpo(train exec.ini --plugin-path ${MISBEHAVE})
if(NOT rc EQUAL 0)
  fail("an exec reward that never replies: exit ${rc}\n${err}")
endif()
metric(exec "rewards/slow/nan_frac" nan)
if(NOT nan STREQUAL "1;1")
  fail("rewards/slow/nan_frac by step: '${nan}', expected 1;1\n${err}")
endif()
message(STATUS "train_hang: exec program that never replies gave NaN batches, run finished")

# ---- the reward-model scorer isolated at threads = 2 (a bare fork deadlocked here)
set(rm "[reward.rm]\nplugin = reward_model.score\nisolate = true\n")
string(APPEND rm "model = ${SRC}/tests/fixtures/reward_model/llama\ntext = minimind\nclip = 3\n")
write_run(rm 2 2 "${rm}")
grpo(train rm.ini --plugin-path ${MISBEHAVE})
if(NOT rc EQUAL 0)
  fail("reward_model.score isolated at threads = 2: exit ${rc} (rc is a message on a hang)\n${err}")
endif()
metric(rm "rewards/rm/nan_frac" nan)
metric(rm "rewards/rm/mean" mean)
list(LENGTH mean n)
if(NOT nan STREQUAL "0;0" OR NOT n EQUAL 2)
  fail("the isolated reward model: nan_frac '${nan}', means '${mean}'; expected finite scores")
endif()
message(STATUS "train_hang: reward_model.score isolated at threads = 2 scored every step")
