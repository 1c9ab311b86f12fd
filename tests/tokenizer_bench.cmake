# bench/bench_tokenizer.c: built with the tests (it needs libgrpo), not registered as a test.
# Run: python3 bench/bench_tokenizer.py --tokenizer DIR   (writes build/bench_tokenizer_corpus.txt)
#      build/bench_tokenizer DIR build/bench_tokenizer_corpus.txt          (see bench/tokenizer.md)
add_executable(bench_tokenizer ${PROJECT_SOURCE_DIR}/bench/bench_tokenizer.c)
target_link_libraries(bench_tokenizer PRIVATE grpo)
set_target_properties(bench_tokenizer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
