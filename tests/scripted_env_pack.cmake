# The scripted environment pack (tests/packs/scripted, grpo/env.h), built as pack scripted into
# <build>/tests/plugins/scripted for test_env (known observations, rewards and turn counts).
function(grpo_scripted_env_pack)
  set(GRPO_PACK_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/plugins)
  set(GRPO_PACK_INSTALL_DIR "") # never installed
  grpo_add_pack(NAME scripted LIBRARY tp-scripted
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/scripted/pack.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/scripted/scripted.c)
  if(TARGET test_env)
    add_dependencies(test_env tp-scripted)
  endif()
endfunction()
grpo_scripted_env_pack()
