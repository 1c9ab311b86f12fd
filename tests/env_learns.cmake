# env_learns: tool use is learnt through an environment (issue 17). The calculator environment
# (plugins/envs/calc) on two-digit multiplications the tiny model cannot work out: only episodes
# that call the calculator and copy its result earn the reward. A small init-model, SFT 700 steps
# (examples/calc_sft.ini: half the prompts call, half guess), then GRPO 60 steps (examples/
# calc.ini). The mean of the last 10 steps must beat the first 10 by >= 0.15 in
# env/tool_use_rate and >= 0.10 in reward, and `grpo eval` on the 300 held-out prompts (greedy
# episodes) must rise by >= 0.15 in both. Measured (2 threads, this file's settings): training
# tool use 0.64 -> 0.99, reward 0.49 -> 0.79; held-out tool use 0.54 -> 1.00, reward 0.50 ->
# 0.87; about 40 s in all.
# Then, when python3 is there, the same first 3 steps with the environment as an external program
# (examples/env-program/calc_env.py through builtin.exec_env): the same game, seed and model give
# the same rewards and tool-use rates step for step as the C pack.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  find_program(GRPO_PYTHON3 python3)
  add_test(NAME env_learns COMMAND ${CMAKE_COMMAND} -DGRPO=$<TARGET_FILE:grpo_cli>
    -DSRC=${PROJECT_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/env_learns
    -DPYTHON3=${GRPO_PYTHON3}
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(env_learns PROPERTIES TIMEOUT 900)
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/examples)
file(COPY ${SRC}/examples/calc ${SRC}/examples/calc.ini ${SRC}/examples/calc_sft.ini
  ${SRC}/examples/env-program DESTINATION ${WORK_DIR}/examples)

function(grpo_run)
  execute_process(COMMAND ${GRPO} ${ARGN} WORKING_DIRECTORY ${WORK_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "env_learns: grpo ${ARGN}: exit ${rc}\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()
# "0.4921875" -> 492 (cmake's math is integer-only)
function(permille text var)
  if(NOT text MATCHES "^([0-9]+)(\\.([0-9]*))?")
    message(FATAL_ERROR "env_learns: '${text}' is not a number")
  endif()
  set(frac "${CMAKE_MATCH_3}000")
  string(SUBSTRING "${frac}" 0 3 frac)
  math(EXPR pm "${CMAKE_MATCH_1} * 1000 + 1${frac} - 1000")
  set(${var} ${pm} PARENT_SCOPE)
endfunction()
# the sum over metrics.jsonl rows [from, to) of key, in per mille
function(metric_sum rows from to key var)
  set(sum 0)
  math(EXPR last "${to} - 1")
  foreach(i RANGE ${from} ${last})
    list(GET rows ${i} row)
    string(JSON v GET "${row}" "${key}")
    permille("${v}" pm)
    math(EXPR sum "${sum} + ${pm}")
  endforeach()
  set(${var} ${sum} PARENT_SCOPE)
endfunction()

grpo_run(init-model runs/calc/init --hidden 64 --layers 2 --heads 4 --kv-heads 2
  --intermediate 192)
grpo_run(sft examples/calc_sft.ini --out runs/calc/sft)
grpo_run(eval examples/calc.ini --model runs/calc/sft)
set(before "${OUT}")
grpo_run(train examples/calc.ini)
grpo_run(eval examples/calc.ini)
set(after "${OUT}")
foreach(key reward env/tool_use_rate)
  string(JSON b GET "${before}" "${key}")
  string(JSON a GET "${after}" "${key}")
  permille("${b}" b)
  permille("${a}" a)
  math(EXPR gain "${a} - ${b}")
  if(gain LESS 150)
    message(FATAL_ERROR "env_learns: held-out ${key} ${b} -> ${a} per mille; expected a rise of "
      "at least 150\nbefore: ${before}\nafter: ${after}")
  endif()
  message(STATUS "env_learns: held-out ${key} ${b} -> ${a} per mille")
endforeach()
# the completions log shows whole episodes: the call, the observation, the answer
file(READ ${WORK_DIR}/runs/calc/train/completions.jsonl log)
if(NOT log MATCHES "calc: [0-9]+\\*[0-9]+\\\\nresult: [0-9]+\\\\n<answer>" OR
   NOT log MATCHES "\"env\":{\"reward\":1,\"turns\":2,\"tool_calls\":1,\"tool_errors\":0}")
  message(FATAL_ERROR "env_learns: completions.jsonl shows no whole episode with its env "
    "results:\n${log}")
endif()
file(STRINGS ${WORK_DIR}/runs/calc/train/metrics.jsonl rows)
list(LENGTH rows n)
if(NOT n EQUAL 60)
  message(FATAL_ERROR "env_learns: ${n} metrics rows; expected 60")
endif()
foreach(key reward env/tool_use_rate)
  metric_sum("${rows}" 0 10 ${key} first)
  metric_sum("${rows}" 50 60 ${key} last)
  math(EXPR first "${first} / 10")
  math(EXPR last "${last} / 10")
  math(EXPR gain "${last} - ${first}")
  set(need 100)
  if(key STREQUAL "env/tool_use_rate")
    set(need 150)
  endif()
  if(gain LESS need)
    message(FATAL_ERROR "env_learns: ${key} rose by ${gain} per mille (first 10 steps "
      "${first}, last 10 ${last}); expected at least ${need} (learning stopped?)")
  endif()
  message(STATUS "env_learns: ${key} ${first} -> ${last} per mille (means of the first and last 10 steps)")
endforeach()

if(NOT PYTHON3)
  message(STATUS "env_learns: no python3: the external program part is skipped")
  return()
endif()
file(READ ${WORK_DIR}/examples/calc.ini run)
string(REPLACE "plugin = calc.calculator" "plugin = builtin.exec_env\ncommand = ${PYTHON3}\ncommand = env-program/calc_env.py" run "${run}")
string(REGEX REPLACE "\nsteps = [0-9]+" "\nsteps = 3" run "${run}")
string(REPLACE "runs/calc/train" "runs/calc/train_py" run "${run}")
file(WRITE ${WORK_DIR}/examples/calc_py.ini "${run}")
grpo_run(train examples/calc_py.ini)
file(STRINGS ${WORK_DIR}/runs/calc/train_py/metrics.jsonl py_rows)
foreach(i 0 1 2)
  list(GET rows ${i} c_row)
  list(GET py_rows ${i} py_row)
  foreach(key reward env/tool_use_rate env/turns)
    string(JSON c GET "${c_row}" "${key}")
    string(JSON py GET "${py_row}" "${key}")
    if(NOT c STREQUAL py)
      message(FATAL_ERROR "env_learns: step ${i}: ${key} is ${py} with the Python program, ${c} "
        "with the C pack; expected the same game to give the same episodes")
    endif()
  endforeach()
endforeach()
message(STATUS "env_learns: the Python program's first 3 steps match the C pack's")
