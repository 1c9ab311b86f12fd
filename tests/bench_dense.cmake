# bench/bench_dense: speed of the dense plugin (not a test; run by hand, see BENCHMARKS.md).
add_executable(bench_dense ${PROJECT_SOURCE_DIR}/bench/bench_dense.c)
target_link_libraries(bench_dense PRIVATE grpo PkgConfig::OPENBLAS)
target_compile_definitions(bench_dense PRIVATE GRPO_PACK_BUILD_DIR="${GRPO_PACK_OUTPUT_DIR}")
