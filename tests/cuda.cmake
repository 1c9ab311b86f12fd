# The CUDA backend's tests (tests/test_cuda_*.c, registered once by tests/CMakeLists.txt):
#   NAME      the real backend on a GPU; exits 77 (skipped) with one line where none is;
#   NAME_emu  the same executable with GRPO_CUDA_EMULATION=1: the kernels on the host emulation
#             (what CI runs, no GPU needed), in its strict mode (emu.h: device memory is
#             inaccessible to host code, as on a GPU).
# Both find the modules in the build tree (kernels.c's compiled-in GRPO_BACKEND_BUILD_DIR).
# test_cuda_emu tests the emulation itself through its own kernels (tests/cuda/*.cu, built here
# on the emulation) and opens no backend, so it is registered once.
grpo_cuda_emu_sources(GRPO_TEST_CUDA_EMU_SOURCES ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/emu_selftest.cu)
add_library(grpo_cuda_emu_selftest STATIC ${GRPO_TEST_CUDA_EMU_SOURCES})
set_target_properties(grpo_cuda_emu_selftest PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_include_directories(grpo_cuda_emu_selftest PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cuda)
target_link_libraries(grpo_cuda_emu_selftest PUBLIC grpo_cuda_emu_rt)

file(GLOB GRPO_CUDA_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_cuda_*.c)
foreach(src ${GRPO_CUDA_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(name STREQUAL "test_cuda_emu")
    target_link_libraries(${name} PRIVATE grpo_cuda_emu_selftest)
    continue()
  endif()
  add_dependencies(${name} grpo_kernels_cuda_emu)
  if(TARGET grpo_kernels_cuda)
    add_dependencies(${name} grpo_kernels_cuda)
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  add_test(NAME ${name}_emu COMMAND ${name})
  set_tests_properties(${name}_emu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "CK_DEFAULT_TIMEOUT=600;GRPO_CUDA_EMULATION=1;GRPO_CUDA_EMU_STRICT=1")
endforeach()
# test_strict_emu (tests/test_strict_emu.c, registered by tests/CMakeLists.txt): strict mode's own
# negative test, on the emulated module only.
add_dependencies(test_strict_emu grpo_kernels_cuda_emu)
set_tests_properties(test_strict_emu PROPERTIES SKIP_RETURN_CODE 77
  ENVIRONMENT "CK_DEFAULT_TIMEOUT=600;GRPO_CUDA_EMULATION=1;GRPO_CUDA_EMU_STRICT=1")
# shared_prompts_on_the_emulated_cuda_backend (tests/test_shared_prefix.c), strict as the others.
add_dependencies(test_shared_prefix grpo_kernels_cuda_emu)
add_test(NAME test_shared_prefix_emu COMMAND test_shared_prefix --emulated-cuda)
set_tests_properties(test_shared_prefix_emu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "CK_DEFAULT_TIMEOUT=600;GRPO_CUDA_EMULATION=1;GRPO_CUDA_EMU_STRICT=1")
