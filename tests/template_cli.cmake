# `grpo template` renders the built-in ChatML template and a dataset line (the expected text is
# the ChatML format itself: <|im_start|>ROLE\nCONTENT<|im_end|>\n..., then <|im_start|>assistant\n).
add_test(NAME cli_template_chatml
  COMMAND grpo_cli template chatml --messages "[{\"role\": \"user\", \"content\": \"hi\"}]")
set_tests_properties(cli_template_chatml PROPERTIES
  PASS_REGULAR_EXPRESSION "^<\\|im_start\\|>user\nhi<\\|im_end\\|>\n<\\|im_start\\|>assistant\n$")
add_test(NAME cli_template_dataset_line
  COMMAND grpo_cli template chatml --data ${PROJECT_SOURCE_DIR}/tests/fixtures/dataset/shapes.jsonl --line 3)
set_tests_properties(cli_template_dataset_line PROPERTIES
  PASS_REGULAR_EXPRESSION "^<\\|im_start\\|>user\n你好<\\|im_end\\|>\n<\\|im_start\\|>assistant\n$")
add_test(NAME cli_template_bad_template
  COMMAND grpo_cli template ${PROJECT_SOURCE_DIR}/tests/fixtures/template/no_such_template.jinja --messages "[]")
set_tests_properties(cli_template_bad_template PROPERTIES WILL_FAIL TRUE)
