# example_pack: a third-party pack builds against the INSTALLED SDK only, and grpo finds it.
#
# Included by tests/CMakeLists.txt, this file registers the test; run with cmake -P (as the test
# does), it is the test:
#   1. cmake --install this build into a temp prefix
#   2. configure + build examples/reward-pack out of tree with CMAKE_PREFIX_PATH = that prefix
#      (find_package(grpo-sdk) + grpo_add_pack), and install the pack to a second temp prefix
#   3. compile the same source with only `pkg-config --cflags grpo-sdk` (the .pc file's check)
#   4. GRPO_PLUGIN_PATH=<the pack's install dir> <prefix>/bin/grpo plugins list: both ids appear
#   5. grpo plugins show example.length_target names its keys and library
#   6. grpo plugins check loads the library and passes the host's ABI and id checks
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME example_pack COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBINARY_DIR=${PROJECT_BINARY_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/example_pack -DGENERATOR=${CMAKE_GENERATOR}
    -DC_COMPILER=${CMAKE_C_COMPILER}
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(example_pack PROPERTIES TIMEOUT 300)
  return()
endif()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "example_pack: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("installing grpo" ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})

run("configuring the example pack" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/reward-pack
  -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/pack-prefix -DCMAKE_C_COMPILER=${C_COMPILER})
# the SDK must come from the install, never from the source tree
if(NOT OUT MATCHES "grpo SDK headers: ${prefix}/")
  message(FATAL_ERROR "example_pack: the SDK was not found in ${prefix}:\n${OUT}")
endif()
run("building the example pack" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("installing the example pack" ${CMAKE_COMMAND} --install ${WORK_DIR}/build)
file(GLOB_RECURSE manifests ${WORK_DIR}/pack-prefix/*/pack.ini)
list(LENGTH manifests n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "example_pack: expected one installed pack.ini, found: ${manifests}")
endif()
get_filename_component(pack_dir ${manifests} DIRECTORY)
get_filename_component(plugin_dir ${pack_dir} DIRECTORY)
if(NOT EXISTS ${pack_dir}/libgrpo-example.so)
  message(FATAL_ERROR "example_pack: ${pack_dir}/libgrpo-example.so was not installed")
endif()

find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  file(GLOB_RECURSE pcs ${prefix}/*/grpo-sdk.pc)
  get_filename_component(pc_dir "${pcs}" DIRECTORY)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
    ${PKG_CONFIG} --cflags grpo-sdk OUTPUT_VARIABLE cflags OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE rc)
  string(REGEX MATCH "-I([^ ]+)" inc "${cflags}")
  get_filename_component(inc "${CMAKE_MATCH_1}" REALPATH)
  if(NOT rc EQUAL 0 OR NOT inc STREQUAL "${prefix}/include" OR NOT EXISTS ${inc}/grpo/plugin.h)
    message(FATAL_ERROR "example_pack: pkg-config --cflags grpo-sdk gave '${cflags}' (${rc}); "
      "expected -I<a path to ${prefix}/include>")
  endif()
  separate_arguments(cflags UNIX_COMMAND "${cflags}")
  run("compiling with pkg-config flags" ${C_COMPILER} -std=c11 -Wall -Wextra -Werror -shared
    -fPIC ${cflags} ${SOURCE_DIR}/examples/reward-pack/example_rewards.c
    -o ${WORK_DIR}/libgrpo-example-pc.so)
else()
  message(STATUS "example_pack: pkg-config not found; the .pc check is skipped")
endif()

set(grpo ${prefix}/bin/grpo)
run("grpo plugins list" ${CMAKE_COMMAND} -E env GRPO_PLUGIN_PATH=${plugin_dir}
  ${grpo} plugins list)
foreach(id example.length_target example.contains_keyword)
  if(NOT OUT MATCHES "${id} +reward +example +0.1.0")
    message(FATAL_ERROR "example_pack: '${id}' missing from grpo plugins list:\n${OUT}")
  endif()
endforeach()
run("grpo plugins show" ${CMAKE_COMMAND} -E env GRPO_PLUGIN_PATH=${plugin_dir}
  ${grpo} plugins show example.length_target)
foreach(want "example.length_target \\(reward\\)" "target +int +default 200"
    "unit +string +default chars" "library: +${pack_dir}/libgrpo-example.so")
  if(NOT OUT MATCHES "${want}")
    message(FATAL_ERROR "example_pack: grpo plugins show lacks '${want}':\n${OUT}")
  endif()
endforeach()
# the one command that loads code: ABI magic, init and exported ids against the manifest
run("grpo plugins check" ${CMAKE_COMMAND} -E env GRPO_PLUGIN_PATH=${plugin_dir}
  ${grpo} plugins check example.length_target example.contains_keyword)
if(NOT OUT MATCHES "ok +example.length_target" OR NOT OUT MATCHES "ok +example.contains_keyword")
  message(FATAL_ERROR "example_pack: grpo plugins check did not pass both ids:\n${OUT}")
endif()
# scoring through a run file, as a run would use the pack (values by the rules in its README:
# length_target 1 at `target`, linear to 0 at 0 and 2*target; contains_keyword case-insensitive)
file(WRITE ${WORK_DIR}/score.ini "[reward.len]\nplugin = example.length_target\ntarget = 4\n"
  "[reward.kw]\nplugin = example.contains_keyword\nweight = 2\nkeywords = answer\n")
file(WRITE ${WORK_DIR}/samples.jsonl "{\"prompt\": \"p\", \"completion\": \"abcd\"}\n"
  "{\"prompt\": \"p\", \"completion\": \"ab\"}\n{\"prompt\": \"p\", \"completion\": \"the Answer\"}\n")
run("grpo reward score" ${CMAKE_COMMAND} -E env GRPO_PLUGIN_PATH=${plugin_dir}
  ${grpo} reward score --config ${WORK_DIR}/score.ini --input ${WORK_DIR}/samples.jsonl)
foreach(want "\"line\": 1, \"rewards\": {\"len\": 1, \"kw\": 0}, \"total\": 1}"
    "\"line\": 2, \"rewards\": {\"len\": 0.5, \"kw\": 0}, \"total\": 0.5}"
    "\"line\": 3, \"rewards\": {\"len\": 0, \"kw\": 1}, \"total\": 2}")
  string(FIND "${OUT}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "example_pack: grpo reward score lacks '${want}':\n${OUT}")
  endif()
endforeach()
message(STATUS "example_pack: built against ${prefix}, listed from ${plugin_dir}, scored with")
