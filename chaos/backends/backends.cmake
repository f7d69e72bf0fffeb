# chaos/backends/backends.cmake: the chaos workload against other lock services
# (chaos/backends/backend_scenarios.h, backends/README.md). Included from
# chaos/CMakeLists.txt when the backends library is built.
#
#   redlock::chaos_backends        the runner and its catalog
#   redlock-chaos-backend-client   a client process over backends/lock_service.h
#   redlock-chaos-backends         the CLI: --list, --all, --scenario, --backend

add_library(redlock_chaos_backends STATIC
  ${CMAKE_CURRENT_LIST_DIR}/backend_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/backend_scenarios.cc)
add_library(redlock::chaos_backends ALIAS redlock_chaos_backends)
redlock_internal_target(redlock_chaos_backends)
target_include_directories(redlock_chaos_backends PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_backends
  PUBLIC redlock::chaos_harness redlock::backends
  PRIVATE absl::strings absl::time)

add_executable(redlock-chaos-backend-client ${CMAKE_CURRENT_LIST_DIR}/backend_client_main.cc)
redlock_internal_target(redlock-chaos-backend-client)
target_link_libraries(redlock-chaos-backend-client PRIVATE redlock_chaos_backends)

add_executable(redlock-chaos-backends ${CMAKE_CURRENT_LIST_DIR}/backends_main.cc)
redlock_internal_target(redlock-chaos-backends)
target_link_libraries(redlock-chaos-backends
  PRIVATE redlock_chaos_backends redlock::flags absl::flags absl::strings absl::time)
add_dependencies(redlock-chaos-backends redlock-chaos-backend-client redlock_clock_shim)
