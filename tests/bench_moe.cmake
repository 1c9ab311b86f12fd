# bench/bench_moe: speed of the moe plugin (not a test; run by hand, see BENCHMARKS.md).
add_executable(bench_moe ${PROJECT_SOURCE_DIR}/bench/bench_moe.c)
target_link_libraries(bench_moe PRIVATE grpo)
target_compile_definitions(bench_moe PRIVATE GRPO_PACK_BUILD_DIR="${GRPO_PACK_OUTPUT_DIR}")
