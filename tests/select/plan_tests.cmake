# Tests of the cost model, the TIDEGATE_TUNE grammar and the plan (src/select/cost_model.cc,
# tune.cc, plan.cc). Pure functions of their inputs: no transport, no ranks.
add_executable(select_plan_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/cost_model_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tune_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plan_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/planner_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/codec_plan_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/hybcomm_test.cc)
target_link_libraries(select_plan_tests PRIVATE tidegate_internal GTest::gtest_main)
tidegate_enable_warnings(select_plan_tests)
gtest_discover_tests(select_plan_tests TEST_PREFIX "select." DISCOVERY_MODE PRE_TEST)
