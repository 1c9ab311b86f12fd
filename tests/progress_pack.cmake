# The progress reward pack (tests/packs/progress): rewards that read grpo_sample's step and
# total_steps (ABI 1.3). Lands in <build>/tests/plugins/progress for test_trainer.
function(grpo_progress_pack)
  set(GRPO_PACK_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/plugins)
  set(GRPO_PACK_INSTALL_DIR "") # never installed
  grpo_add_pack(NAME progress LIBRARY tp-progress
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/pack.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/progress.c)
  if(TARGET test_trainer)
    add_dependencies(test_trainer tp-progress)
  endif()
endfunction()
grpo_progress_pack()
