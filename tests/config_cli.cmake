# config_cli: `grpo config check` and `grpo config keys` as a user runs them.
#
# Included by tests/CMakeLists.txt, this file registers the test; run with cmake -P (as the test
# does), it is the test:
#   1. check tests/fixtures/config/cli_check.ini against the manifest-only pack in packs/: its
#      rewards cannot be created (no library), each named at its line; with --no-check-paths
#      (no reward is created): exit 0, the resolved INI on stdout; checking that output again
#      gives the same keys and values
#   2. a bad file: exit 1 and the FILE:LINE message on stderr
#   3. a key of another section is suggested across sections; train.threads is bounded
#   4. `grpo config keys` is itself a run file that checks (defaults only)
#   5. no subcommand: exit 2
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME config_cli COMMAND ${CMAKE_COMMAND} -DGRPO=$<TARGET_FILE:grpo_cli>
    -DFIXTURES=${PROJECT_SOURCE_DIR}/tests/fixtures/config
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/config_cli -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(config_cli PROPERTIES TIMEOUT 60)
  return()
endif()

function(grpo_run expect_rc)
  execute_process(COMMAND ${GRPO} ${ARGN} WORKING_DIRECTORY ${FIXTURES}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "config_cli: grpo ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# Keys and values only: comment lines and "; default" marks dropped.
function(strip_comments text var)
  string(REGEX REPLACE "(^|\n);[^\n]*" "" text "${text}")
  string(REGEX REPLACE " +; default[^\n]*" "" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# check creates every reward: the manifest-only pack's library is missing, and each reward of it
# is refused at its section's line; --no-check-paths resolves without creating them
grpo_run(1 config check cli_check.ini --plugin-path packs)
foreach(line 8 12)
  string(FIND "${ERR}" "cli_check.ini:${line}: pack 'cfgtest' (" at)
  if(at LESS 0)
    message(FATAL_ERROR "config_cli: expected the reward at line ${line} refused, got:\n${ERR}")
  endif()
endforeach()
grpo_run(0 config check cli_check.ini --plugin-path packs --no-check-paths)
set(first "${OUT}")
foreach(want "\n[reward.fmt]\nplugin = cfgtest.format\n" "\npattern = ^<answer>.*</answer>$\n"
    "\nvalue = 0.5                             ; default (manifest)\n"
    "\nurl = http://localhost:8000/score;v=1\n" "\nnum_generations = 4\n")
  string(FIND "${first}" "${want}" at)
  if(at LESS 0)
    message(FATAL_ERROR "config_cli: the resolved config lacks '${want}':\n${first}")
  endif()
endforeach()
file(WRITE ${WORK_DIR}/resolved.ini "${first}")
grpo_run(0 config check ${WORK_DIR}/resolved.ini --plugin-path packs --no-check-paths)
strip_comments("${first}" a)
strip_comments("${OUT}" b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "config_cli: the resolved config does not read back the same:\n${a}\n---\n${b}")
endif()

grpo_run(1 config check bad_unknown_key.ini --plugin-path packs)
string(FIND "${ERR}" "bad_unknown_key.ini:2: unknown key 'num_generation' in [sampling] (did you mean num_generations?)\n" at)
if(at LESS 0)
  message(FATAL_ERROR "config_cli: expected the unknown-key message, got:\n${ERR}")
endif()

# a typo whose right key lives in another section, and a thread count past the bound
file(WRITE ${WORK_DIR}/cross.ini "[grpo]\nnum_generation = 4\n[train]\nthreads = 100000\n")
grpo_run(1 config check ${WORK_DIR}/cross.ini --no-train)
foreach(want "cross.ini:2: unknown key 'num_generation' in [grpo]; num_generations is a key of [sampling]\n"
    "cross.ini:4: train.threads: expected an integer in [0, 1024], got 100000\n")
  string(FIND "${ERR}" "${want}" at)
  if(at LESS 0)
    message(FATAL_ERROR "config_cli: expected '${want}', got:\n${ERR}")
  endif()
endforeach()

grpo_run(0 config keys)
file(WRITE ${WORK_DIR}/keys.ini "${OUT}")
grpo_run(0 config check ${WORK_DIR}/keys.ini --no-train --no-check-paths)

grpo_run(2 config)
