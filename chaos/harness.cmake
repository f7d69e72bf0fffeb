# chaos/harness.cmake: the chaos harness proper (DESIGN.md section 7).
# Included from chaos/CMakeLists.txt.
#
#   redlock::chaos_harness   static library: node supervisor, replicated nodes, partitions,
#                            workload (client processes), scenarios, runner
#   redlock-chaos-client     one client process of a run (the library, or an external
#                            client through its adapter: chaos/external_client.h)
#   redlock-chaos            the CLI: --list, --quick, --full, --scenario NAME
#
# The deliberately broken clients of the broken-* scenarios are test code:
# tests/CMakeLists.txt builds them as redlock-chaos-broken-client, next to
# redlock-chaos (without the tests those scenarios are skipped).

if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)
endif()

add_library(redlock_chaos_harness STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cleanup.cc
  ${CMAKE_CURRENT_LIST_DIR}/supervisor.cc
  ${CMAKE_CURRENT_LIST_DIR}/partition.cc
  ${CMAKE_CURRENT_LIST_DIR}/replication.cc
  ${CMAKE_CURRENT_LIST_DIR}/workload.cc
  ${CMAKE_CURRENT_LIST_DIR}/external_client.cc
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
  PRIVATE redlock::svg nlohmann_json::nlohmann_json)
# The runner finds the client binaries next to its own executable; this
# directory (where they are built) is the fallback.
# External clients' adapters are found under chaos/clients of the source tree
# (chaos/external_client.h; $REDLOCK_CHAOS_CLIENTS_DIR overrides it).
target_compile_definitions(redlock_chaos_harness
  PRIVATE REDLOCK_CHAOS_BINARY_DIR="${CMAKE_CURRENT_BINARY_DIR}"
          REDLOCK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

add_executable(redlock-chaos-client ${CMAKE_CURRENT_LIST_DIR}/client_main.cc)
redlock_internal_target(redlock-chaos-client)
target_link_libraries(redlock-chaos-client PRIVATE redlock::chaos_harness)

add_executable(redlock-chaos ${CMAKE_CURRENT_LIST_DIR}/chaos_main.cc)
redlock_internal_target(redlock-chaos)
target_link_libraries(redlock-chaos PRIVATE redlock::chaos_harness absl::strings absl::time)
# Scenarios spawn the client and preload the clock shim.
add_dependencies(redlock-chaos redlock-chaos-client redlock_clock_shim)
