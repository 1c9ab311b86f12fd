# The layering, read by scripts/check_layers.sh from the symbols (nm) of the built objects of each
# library target (CMakeFiles/<target>.dir), one graph per library:
#   core_layers     core/ is layered (no call or include up a layer) and libgrpo has no two files
#                   calling each other in a circle;
#   plugins_layers  no circle in any pack's library (grpo-dense, grpo-rewards-builtin, ...);
#   kernels_layers  no circle in grpo_kernels_cpu, grpo_kernels_cuda_emu, grpo_kernels_cuda (when
#                   built), the emulation's runtime (the op tables only name kernels; the
#                   helpers every kernel calls live in cpu_ctx/cpu_memory, cuda_ctx/cuda_memory);
#   check_layers_fixture  the script itself fails on a circle, a call or include up a layer, in
#                   tiny object trees built from fixture sources (tests/check_layers_fixture.sh).
foreach(family core plugins kernels)
  add_test(NAME ${family}_layers
           COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh ${PROJECT_BINARY_DIR}
                   ${family}/)
endforeach()
add_test(NAME check_layers_fixture
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_layers_fixture.sh ${CMAKE_C_COMPILER})
