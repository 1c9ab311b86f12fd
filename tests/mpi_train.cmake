# train_mpi: data-parallel `grpo train` under mpirun (issue 21; tests/mpi/train_mpi.sh): 2 ranks
# train as one process with the same global batch, a killed or failing rank ends the other, and
# a resume under mpirun continues exactly. Skipped (exit 77) when this build has no MPI or
# mpirun is missing.
add_executable(mpi_compare ${CMAKE_CURRENT_SOURCE_DIR}/mpi/compare.c)
target_link_libraries(mpi_compare PRIVATE grpo)
find_program(GRPO_MPIRUN NAMES mpirun mpiexec)
add_test(NAME train_mpi
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/train_mpi.sh $<TARGET_FILE:grpo_cli>
                 $<TARGET_FILE:mpi_compare> ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/train_mpi "${GRPO_HAVE_MPI}" "${GRPO_MPIRUN}")
set_tests_properties(train_mpi PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
