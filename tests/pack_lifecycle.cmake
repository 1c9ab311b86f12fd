# pack_lifecycle: a reward pack from `grpo pack new` to a run, as a third-party author and a user
# would take it (issue 20's "done means").
#
# Included by tests/CMakeLists.txt, this file registers the test; run with cmake -P (as the test
# does), it is the test:
#   1. cmake --install this build into a temp prefix (grpo, the SDK, the author's guide)
#   2. grpo pack new my-pack; configure + build it out of tree against that prefix only, and
#      with the guide's pkg-config recipe (the commands of sdk/PACKS.md, as written there)
#   3. grpo plugins check: the library loads and its two self-tests pass
#   4. grpo pack bundle -> my-pack-0.1.0.tar.gz; grpo pack install into a temp HOME
#      (${HOME}/.local/share/grpo/packs, on the default plugin path); grpo pack list shows it
#   5. grpo reward score with a run file naming my-pack.keyword: the installed copy scores
#   6. a newer copy (0.2.0, another default keyword) via --plugin-path shadows the installed one:
#      its scores, and one note naming both
#   7. installing 0.2.0 over 0.1.0 is refused without --force and done with it
#   8. grpo pack remove; grpo pack list is empty
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME pack_lifecycle COMMAND ${CMAKE_COMMAND}
    -DBINARY_DIR=${PROJECT_BINARY_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/pack_lifecycle
    -DGENERATOR=${CMAKE_GENERATOR} -DC_COMPILER=${CMAKE_C_COMPILER}
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(pack_lifecycle PROPERTIES TIMEOUT 300)
  return()
endif()

# run(WHAT EXPECT_RC COMMAND...): OUT and ERR hold stdout and stderr
function(run what want_rc)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want_rc)
    message(FATAL_ERROR "pack_lifecycle: ${what}: exit ${rc}, expected ${want_rc}:\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(expect what text want)
  string(FIND "${text}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "pack_lifecycle: ${what} lacks '${want}':\n${text}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(home ${WORK_DIR}/home)
set(packs ${home}/.local/share/grpo/packs)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run("installing grpo" 0 ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})
# the user's grpo: its own HOME, no plugin path from the environment
set(grpo ${CMAKE_COMMAND} -E env --unset=XDG_DATA_HOME --unset=GRPO_PLUGIN_PATH HOME=${home}
  ${prefix}/bin/grpo)

if(NOT EXISTS ${prefix}/share/doc/grpo-sdk/PACKS.md)
  message(FATAL_ERROR "pack_lifecycle: the author's guide was not installed with the SDK")
endif()

# 2. the skeleton, built against the installed SDK only (sdk/PACKS.md section 1, as written)
run("grpo pack new" 0 ${grpo} pack new my-pack)
foreach(f CMakeLists.txt pack.ini my-pack.c README.md)
  if(NOT EXISTS ${WORK_DIR}/my-pack/${f})
    message(FATAL_ERROR "pack_lifecycle: grpo pack new wrote no ${f}")
  endif()
endforeach()
function(build_pack src)
  run("configuring ${src}" 0 ${CMAKE_COMMAND} -S ${src} -B ${src}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER}
    "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror")
  run("building ${src}" 0 ${CMAKE_COMMAND} --build ${src}/build)
endfunction()
build_pack(my-pack)
set(built my-pack/build/packs/my-pack)

# 3. as written, it passes every check, self-tests included
run("grpo plugins check" 0 ${grpo} plugins check --plugin-path my-pack/build/packs)
expect("grpo plugins check" "${OUT}" "ok    my-pack.keyword")
expect("grpo plugins check" "${OUT}" "2 self-tests passed")
# the guide's pkg-config recipe
file(GLOB_RECURSE pcs ${prefix}/*/grpo-sdk.pc)
get_filename_component(pc_dir "${pcs}" DIRECTORY)
file(MAKE_DIRECTORY ${WORK_DIR}/mypacks/my-pack)
set(recipe "cc -std=c11 -O2 -shared -fPIC $(pkg-config --cflags grpo-sdk) -Wl,--no-undefined "
  "my-pack/my-pack.c -o mypacks/my-pack/libgrpo-my-pack.so && cp my-pack/pack.ini mypacks/my-pack/")
string(CONCAT recipe ${recipe})
run("the guide's pkg-config recipe" 0 ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
  sh -c "${recipe}")
run("grpo plugins check (pkg-config build)" 0 ${grpo} plugins check --plugin-path mypacks
  my-pack.keyword)
run("pkg-config --variable=packdir" 0 ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
  pkg-config --variable=packdir grpo-sdk)
string(STRIP "${OUT}" packdir)
get_filename_component(packdir "${packdir}" REALPATH)
if(NOT EXISTS ${packdir}/builtin/pack.ini)
  message(FATAL_ERROR "pack_lifecycle: packdir '${packdir}' is not the installed pack dir")
endif()

# 4. bundle, install, list
run("grpo pack bundle" 0 ${grpo} pack bundle ${built})
expect("grpo pack bundle" "${OUT}" "wrote my-pack-0.1.0.tar.gz")
run("grpo pack install" 0 ${grpo} pack install my-pack-0.1.0.tar.gz)
expect("grpo pack install" "${OUT}" "installed my-pack 0.1.0 into ${packs}/my-pack")
foreach(f pack.ini libgrpo-my-pack.so SHA256SUMS)
  if(NOT EXISTS ${packs}/my-pack/${f})
    message(FATAL_ERROR "pack_lifecycle: ${packs}/my-pack/${f} was not installed")
  endif()
endforeach()
run("grpo pack list" 0 ${grpo} pack list)
expect("grpo pack list" "${OUT}" "my-pack.keyword")

# 5. a run uses the installed pack (found on the default plugin path)
file(WRITE ${WORK_DIR}/score.ini "[reward.kw]\nplugin = my-pack.keyword\n")
file(WRITE ${WORK_DIR}/samples.jsonl "{\"prompt\": \"p\", \"completion\": \"the answer\"}\n"
  "{\"prompt\": \"p\", \"completion\": \"no\"}\n")
set(score reward score --config ${WORK_DIR}/score.ini --input ${WORK_DIR}/samples.jsonl)
run("grpo reward score (installed)" 0 ${grpo} ${score})
expect("grpo reward score (installed)" "${OUT}" "\"line\": 1, \"rewards\": {\"kw\": 1}")
expect("grpo reward score (installed)" "${OUT}" "\"line\": 2, \"rewards\": {\"kw\": 0}")

# 6. a newer copy first on the plugin path wins, with one note naming both
file(COPY ${WORK_DIR}/my-pack/ DESTINATION ${WORK_DIR}/demo2 PATTERN build EXCLUDE)
file(READ ${WORK_DIR}/demo2/pack.ini ini)
string(REPLACE "version = 0.1.0" "version = 0.2.0" ini "${ini}")
string(REPLACE "default = answer" "default = no" ini "${ini}")
string(REPLACE "completion = the answer is 4\nexpect = 1" "completion = the answer is 4\nexpect = 0"
  ini "${ini}")
file(WRITE ${WORK_DIR}/demo2/pack.ini "${ini}")
build_pack(demo2)
run("grpo reward score (shadowed)" 0 ${grpo} ${score} --plugin-path ${WORK_DIR}/demo2/build/packs)
expect("grpo reward score (shadowed)" "${OUT}" "\"line\": 1, \"rewards\": {\"kw\": 0}")
expect("grpo reward score (shadowed)" "${OUT}" "\"line\": 2, \"rewards\": {\"kw\": 1}")
expect("grpo reward score (shadowed)" "${ERR}" "note: pack 'my-pack' 0.1.0 (${packs}/my-pack/pack.ini) is shadowed by 0.2.0 (${WORK_DIR}/demo2/build/packs/my-pack/pack.ini)")
run("grpo plugins list (shadowed)" 0 ${grpo} plugins list
  --plugin-path ${WORK_DIR}/demo2/build/packs)
expect("grpo plugins list (shadowed)" "${OUT}" "shadowed packs")

# 7. another version replaces the installed one only with --force
run("grpo pack install 0.2.0" 1 ${grpo} pack install ${WORK_DIR}/demo2/build/packs/my-pack)
expect("grpo pack install 0.2.0" "${ERR}" "pack 'my-pack' 0.1.0 is installed in ${packs}/my-pack; this is 0.2.0: pass --force")
run("grpo pack install 0.2.0 --force" 0 ${grpo} pack install
  ${WORK_DIR}/demo2/build/packs/my-pack --force)
expect("grpo pack install 0.2.0 --force" "${OUT}" "replaced 0.1.0")

# 8. removed, and gone from the list
run("grpo pack remove" 0 ${grpo} pack remove my-pack)
run("grpo pack list (empty)" 0 ${grpo} pack list)
expect("grpo pack list (empty)" "${OUT}" "no packs installed in ${packs}")
message(STATUS "pack_lifecycle: new, built against ${prefix}, bundled, installed, scored, shadowed, replaced, removed")
