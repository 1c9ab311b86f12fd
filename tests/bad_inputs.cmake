# bad_inputs: the catalogue of bad inputs in tests/bad_inputs/cases (run files, data, weights,
# tokenizers, templates, packs, exec programs, checkpoints), each run through the grpo binary and
# checked for its exit status and the stable part of its message (tests/bad_inputs/README.md).
# It needs the built packs and the broken test plugins of tests/plugins.cmake.
add_test(NAME bad_inputs COMMAND bash ${PROJECT_SOURCE_DIR}/tests/bad_inputs/run.sh
  --grpo $<TARGET_FILE:grpo_cli> --work ${CMAKE_CURRENT_BINARY_DIR}/bad_inputs
  --packs ${GRPO_PACK_OUTPUT_DIR} --test-packs ${CMAKE_CURRENT_BINARY_DIR}/plugins)
set_tests_properties(bad_inputs PROPERTIES TIMEOUT 600)
