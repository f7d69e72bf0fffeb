# chaos/harness.cmake: the chaos harness proper (DESIGN.md section 7).
# Included from chaos/CMakeLists.txt.
#
#   redlock::chaos_harness   static library: node supervisor, partitions,
#                            workload (client processes), scenarios, runner
#   redlock_chaos_broken     static library: tests/chaos/broken_client.h, the
#                            deliberately broken Redlock variants
#   redlock-chaos-client     one client process of a run (--variant=...)
#   redlock-chaos            the CLI: --list, --quick, --full, --scenario NAME
#   chaos_harness_test       test (label chaos): unit tests of the pieces and
#                            the --quick subset through the same runner

if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)
endif()

add_library(redlock_chaos_harness STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cleanup.cc
  ${CMAKE_CURRENT_LIST_DIR}/supervisor.cc
  ${CMAKE_CURRENT_LIST_DIR}/partition.cc
  ${CMAKE_CURRENT_LIST_DIR}/workload.cc
  ${CMAKE_CURRENT_LIST_DIR}/scenarios.cc
  ${CMAKE_CURRENT_LIST_DIR}/scenario_catalog.cc)
add_library(redlock::chaos_harness ALIAS redlock_chaos_harness)
redlock_internal_target(redlock_chaos_harness)
target_include_directories(redlock_chaos_harness PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_harness
  PUBLIC redlock::redlock redlock::testkit redlock::chaos_checker redlock::chaos_plot
         redlock::chaos_fault_proxy
         redlock::chaos_clock_control
         absl::status absl::statusor absl::strings absl::str_format absl::time Threads::Threads
  PRIVATE redlock::svg PkgConfig::HIREDIS nlohmann_json::nlohmann_json)
# The runner finds the client binary next to its own executable; this is the
# fallback.
target_compile_definitions(redlock_chaos_harness
  PRIVATE REDLOCK_CHAOS_CLIENT_PATH="$<TARGET_FILE_DIR:redlock_chaos_harness>/redlock-chaos-client")

add_library(redlock_chaos_broken STATIC ${PROJECT_SOURCE_DIR}/tests/chaos/broken_client.cc)
redlock_internal_target(redlock_chaos_broken)
target_include_directories(redlock_chaos_broken PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_broken
  PUBLIC redlock::chaos_harness
  PRIVATE PkgConfig::HIREDIS absl::strings absl::time)

add_executable(redlock-chaos-client ${CMAKE_CURRENT_LIST_DIR}/client_main.cc)
redlock_internal_target(redlock-chaos-client)
target_link_libraries(redlock-chaos-client PRIVATE redlock_chaos_broken redlock::chaos_harness)

add_executable(redlock-chaos ${CMAKE_CURRENT_LIST_DIR}/chaos_main.cc)
redlock_internal_target(redlock-chaos)
target_link_libraries(redlock-chaos PRIVATE redlock::chaos_harness absl::strings absl::time)
# Scenarios spawn the client and preload the clock shim.
add_dependencies(redlock-chaos redlock-chaos-client redlock_clock_shim)

if(REDLOCK_BUILD_TESTS)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  redlock_add_test(chaos_harness_test
    SOURCES ${PROJECT_SOURCE_DIR}/tests/chaos/harness_test.cc
    LIBS redlock::chaos_harness PkgConfig::HIREDIS absl::strings absl::time
    LABELS chaos
    TIMEOUT 900)
  add_dependencies(chaos_harness_test redlock-chaos-client redlock_clock_shim)

  # The kleppmann picture rendered by headless Chromium and checked not blank.
  # Label "browser" too: scripts/test.sh (and so CI) leaves it out, as
  # chromium is an extra install (README); without chromium it is skipped,
  # except under CI=true, where it fails.
  add_test(NAME chaos_plot_browser_test
    COMMAND ${PROJECT_SOURCE_DIR}/scripts/render-chaos-plot.sh --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(chaos_plot_browser_test PROPERTIES
    LABELS "chaos;browser" SKIP_RETURN_CODE 77 TIMEOUT 300)
  redlock_sanitizer_environment(chaos_plot_browser_test)
endif()
