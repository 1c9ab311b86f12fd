# The external test scorer for builtin.exec, and where test_rewards_exec finds it.
add_executable(exec_scorer ${CMAKE_CURRENT_SOURCE_DIR}/exec_scorers/scorer.c)
target_link_libraries(exec_scorer PRIVATE PkgConfig::CJSON)
if(TARGET test_rewards_exec)
  target_compile_definitions(test_rewards_exec PRIVATE EXEC_SCORER="$<TARGET_FILE:exec_scorer>")
  add_dependencies(test_rewards_exec exec_scorer)
endif()
