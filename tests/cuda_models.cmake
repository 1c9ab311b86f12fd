# The CUDA backend on whole models: the transformers-parity suites (test_dense, test_moe,
# test_lora), packed against padded training (test_packed_training: segment ids, ABI 1.7) and
# checkpoints streamed from device memory (test_checkpoint_stream), decode and the sampler on a
# paged KV cache against the unpaged one (test_kv_paged) again with
# GRPO_TEST_BACKEND=cuda (tests/test_backend.h), and `grpo train` of the embedded default's model
# on cuda against cpu (tests/cli/cuda_train.sh). Each twice: NAME_cuda
# on a real GPU (skipped, exit 77, where none is) and NAME_cuda_emu under the host emulation of
# kernels/cuda (always runs: what CI checks) in its strict mode, where host code that reads or
# writes device memory directly (the packs, the host, these tests) faults as it would on a GPU,
# and device work given host memory (a kernel's pointer argument, a copy's device side) stops with
# a message (kernels/cuda/emu/emu.h). Natively the suites run unforked (CK_FORK=no): a
# CUDA context does not survive fork, and test_backend_require opens the backend in main.
# The _emu model runs are labelled cuda_emu_model: the sanitizer pass of scripts/test.sh skips
# them (minutes each at -O0; the kernels' own parity tests do run under ASan+UBSan, and the packs
# run under it on the cpu backend).
foreach(suite test_dense test_moe test_lora test_packed_training test_checkpoint_stream
        test_kv_paged)
  add_test(NAME ${suite}_cuda COMMAND ${suite})
  add_test(NAME ${suite}_cuda_emu COMMAND ${suite})
  set_tests_properties(${suite}_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800
    ENVIRONMENT "GRPO_TEST_BACKEND=cuda;CK_FORK=no;CK_DEFAULT_TIMEOUT=600;CK_TIMEOUT_MULTIPLIER=10")
  set_tests_properties(${suite}_cuda_emu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800
    LABELS cuda_emu_model
    ENVIRONMENT "GRPO_TEST_BACKEND=cuda;GRPO_CUDA_EMULATION=1;GRPO_CUDA_EMU_STRICT=1;CK_DEFAULT_TIMEOUT=600;CK_TIMEOUT_MULTIPLIER=10")
endforeach()
add_test(NAME cli_cuda_train
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/cuda_train.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
add_test(NAME cli_cuda_train_emu
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/cuda_train.sh $<TARGET_FILE:grpo_cli>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_cuda_train PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
set_tests_properties(cli_cuda_train_emu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800
                     LABELS cuda_emu_model
                     ENVIRONMENT "GRPO_CUDA_EMULATION=1;GRPO_CUDA_EMU_STRICT=1")
