# Small plugin libraries for test_registry.c: one good pack, one per way a library can break the
# plugin ABI (built from tests/plugins/test_plugin.c with one VARIANT_* define each), and a C++
# pack. Each lands in tests/plugins/<variant>/ with its pack.ini; none is installed and none is in
# the build's packs/ dir, so `grpo plugins list` never sees them.
function(grpo_test_plugins)
  set(GRPO_PACK_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/plugins)
  set(GRPO_PACK_INSTALL_DIR "") # never installed
  # LISTED is a second good one, loaded only by the `grpo plugins` test (a fresh dlopen there)
  set(variants good LISTED BAD_TAG ABI_MAJOR_OLD ABI_MAJOR_NEW ABI_MINOR_NEW ABI_MINOR_OLD
      MAGIC_SMALL NO_MAGIC NO_INIT
      MISSING_ID EXTRA_ID DUP_ID INIT_FAIL SMALL_DESC WITH_MODEL MODEL_AS_REWARD MODEL_1_2)
  foreach(v ${variants})
    string(TOLOWER ${v} name)
    set(TP_LIBRARY libtp-${name}.so)
    set(template pack.ini.in)
    if(v MATCHES "MODEL")
      set(template pack_model.ini.in)
    endif()
    configure_file(${CMAKE_CURRENT_SOURCE_DIR}/plugins/${template}
      ${CMAKE_CURRENT_BINARY_DIR}/plugins/${name}.ini @ONLY)
    grpo_add_pack(NAME ${name} LIBRARY tp-${name}
      MANIFEST ${CMAKE_CURRENT_BINARY_DIR}/plugins/${name}.ini
      SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_plugin.c)
    if(NOT v STREQUAL "good")
      target_compile_definitions(tp-${name} PRIVATE VARIANT_${v})
    endif()
  endforeach()
  target_compile_definitions(tp-abi_major_old PRIVATE MAGIC_MAJOR_DELTA=-1)
  target_compile_definitions(tp-abi_major_new PRIVATE MAGIC_MAJOR_DELTA=1)
  target_compile_definitions(tp-abi_minor_new PRIVATE MAGIC_MINOR_DELTA=1)
  target_compile_definitions(tp-abi_minor_old PRIVATE MAGIC_MINOR_DELTA=-1)
  set(TP_LIBRARY libtp-cxx.so)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/plugins/pack.ini.in
    ${CMAKE_CURRENT_BINARY_DIR}/plugins/cxx.ini @ONLY)
  grpo_add_pack(NAME cxx LIBRARY tp-cxx MANIFEST ${CMAKE_CURRENT_BINARY_DIR}/plugins/cxx.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/plugins/cxx_pack.cpp)
  # A pack whose rewards misbehave at run time (scribble on the batch, write half their scores,
  # leave errors unterminated, exit, crash): tests/packs/misbehave, lands in plugins/misbehave.
  grpo_add_pack(NAME misbehave LIBRARY tp-misbehave
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/misbehave/pack.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/misbehave/misbehave.c)
  # Rewards for the self-test runner (tests/test_pack_selftest.c): tests/packs/selftest.
  grpo_add_pack(NAME selftest LIBRARY tp-selftest
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/selftest/pack.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/selftest/selftest.c)
  foreach(t test_pack_selftest test_pack_install)
    if(TARGET ${t})
      add_dependencies(${t} tp-selftest)
    endif()
  endforeach()
  if(TARGET test_registry)
    add_dependencies(test_registry tp-good tp-listed tp-bad_tag tp-abi_major_old
      tp-abi_major_new tp-abi_minor_new tp-abi_minor_old tp-magic_small tp-no_magic tp-no_init tp-missing_id
      tp-extra_id tp-dup_id tp-init_fail tp-small_desc tp-with_model tp-model_as_reward tp-model_1_2 tp-cxx
      tp-misbehave)
  endif()
  if(TARGET test_cli_reward)
    add_dependencies(test_cli_reward tp-misbehave)
  endif()
  if(TARGET test_plugin_crash)
    add_dependencies(test_plugin_crash tp-misbehave)
  endif()
endfunction()
grpo_test_plugins()
