# Tests of the bandwidth probe: the profile's text form, and run_probe over real TCP transports
# between ranks that are threads of one process (the TCP test world is reused from
# tests/transport_tcp).
add_executable(select_probe_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/codec_probe_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/probe_profile_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/probe_test.cc
  ${PROJECT_SOURCE_DIR}/tests/transport_tcp/tcp_test_util.cc)
target_link_libraries(select_probe_tests PRIVATE tidegate_internal GTest::gtest_main)
tidegate_enable_warnings(select_probe_tests)
gtest_discover_tests(select_probe_tests TEST_PREFIX "select." DISCOVERY_MODE PRE_TEST
                     PROPERTIES TIMEOUT 120)

# A per-process driver of the probe for the emulated cluster (see its header); built with the
# tests, run by hand or by scripts, never by ctest.
add_executable(select_probe_cluster ${CMAKE_CURRENT_SOURCE_DIR}/probe_cluster_main.cc)
target_link_libraries(select_probe_cluster PRIVATE tidegate_internal)
tidegate_enable_warnings(select_probe_cluster)
