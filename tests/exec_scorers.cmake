# The external test scorer for builtin.exec, and where test_rewards_exec finds it. The test also
# checks the program-path rule directly, so it compiles the pack's exec_path.c (plain libc).
add_executable(exec_scorer ${CMAKE_CURRENT_SOURCE_DIR}/exec_scorers/scorer.c)
target_link_libraries(exec_scorer PRIVATE PkgConfig::CJSON)
if(TARGET test_rewards_exec)
  target_compile_definitions(test_rewards_exec PRIVATE EXEC_SCORER="$<TARGET_FILE:exec_scorer>")
  target_sources(test_rewards_exec PRIVATE ${PROJECT_SOURCE_DIR}/plugins/rewards/builtin/exec_path.c)
  target_include_directories(test_rewards_exec PRIVATE ${PROJECT_SOURCE_DIR}/plugins/rewards/builtin)
  add_dependencies(test_rewards_exec exec_scorer)
endif()
