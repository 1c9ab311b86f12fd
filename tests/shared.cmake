# The cases that need ../shared (the MiniMind tokenizers, templates and config; the tests find it
# through GRPO_SHARED_DIR, compiled in as ${PROJECT_SOURCE_DIR}/../shared, overridden by the
# environment): each Check suite again with --shared, the cases tagged "shared" only (its plain
# registration runs the rest), and cli_tokenize_json's MiniMind cases. Without the data each is
# a ctest skip with one line naming what is missing, and a failure under CI=true
# (tests/test_skip.h, tests/cli/skip.sh).
foreach(name test_tokenizer test_chat_template test_env test_safetensors_hfdir)
  add_test(NAME ${name}_shared COMMAND ${name} --shared)
  set_tests_properties(${name}_shared PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "CK_DEFAULT_TIMEOUT=600")
endforeach()
add_test(NAME cli_tokenize_json_shared
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/tokenize_json.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR} --shared)
set_tests_properties(cli_tokenize_json_shared PROPERTIES SKIP_RETURN_CODE 77)
