# The progress reward pack (tests/packs/progress): rewards that read grpo_sample's step and
# total_steps (ABI 1.3), built as pack pg into <build>/tests/plugins/progress, and as pack pg12
# (PG_SDK_1_2: a library built against SDK 1.2's smaller grpo_sample) into .../progress12, for
# test_trainer.
function(grpo_progress_pack)
  set(GRPO_PACK_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/plugins)
  set(GRPO_PACK_INSTALL_DIR "") # never installed
  grpo_add_pack(NAME progress LIBRARY tp-progress
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/pack.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/progress.c)
  grpo_add_pack(NAME progress12 LIBRARY tp-progress12
    MANIFEST ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/pack_1_2.ini
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/packs/progress/progress.c)
  target_compile_definitions(tp-progress12 PRIVATE PG_SDK_1_2)
  if(TARGET test_trainer)
    add_dependencies(test_trainer tp-progress tp-progress12)
  endif()
endfunction()
grpo_progress_pack()
