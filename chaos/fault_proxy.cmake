# chaos/fault_proxy.cmake: the fault-injecting TCP proxy (DESIGN.md section 7).
# Included from chaos/CMakeLists.txt, with the bench or the chaos harness.
#
#   redlock::chaos_fault_proxy  static library: chaos/fault_proxy.h (the chaos
#                               harness, and redlock-bench's slow nodes)
#   redlock-proxy               redlock-proxy --map LISTEN=UPSTREAM ... --control HOST:PORT
#                               (with REDLOCK_BUILD_CHAOS)

add_library(redlock_chaos_fault_proxy STATIC ${CMAKE_CURRENT_LIST_DIR}/fault_proxy.cc)
add_library(redlock::chaos_fault_proxy ALIAS redlock_chaos_fault_proxy)
redlock_internal_target(redlock_chaos_fault_proxy)
target_include_directories(redlock_chaos_fault_proxy PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_fault_proxy
  PUBLIC absl::status absl::statusor absl::strings absl::time
  PRIVATE Threads::Threads)

if(REDLOCK_BUILD_CHAOS)
  add_executable(redlock-proxy ${CMAKE_CURRENT_LIST_DIR}/fault_proxy_main.cc)
  redlock_internal_target(redlock-proxy)
  target_link_libraries(redlock-proxy PRIVATE redlock::chaos_fault_proxy absl::strings absl::status)
endif()
