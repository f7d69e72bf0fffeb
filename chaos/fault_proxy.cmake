# chaos/fault_proxy.cmake: the fault-injecting TCP proxy (DESIGN.md section 7).
# Included from chaos/CMakeLists.txt.
#
#   redlock::chaos_fault_proxy  static library: chaos/fault_proxy.h
#   redlock-proxy               redlock-proxy --map LISTEN=UPSTREAM ... --control HOST:PORT
#   chaos_fault_proxy_test      test (label chaos): in-test echo server, the
#                               redlock-proxy control protocol, a real redis-server

add_library(redlock_chaos_fault_proxy STATIC ${CMAKE_CURRENT_LIST_DIR}/fault_proxy.cc)
add_library(redlock::chaos_fault_proxy ALIAS redlock_chaos_fault_proxy)
redlock_internal_target(redlock_chaos_fault_proxy)
target_include_directories(redlock_chaos_fault_proxy PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_fault_proxy
  PUBLIC absl::status absl::statusor absl::strings absl::time
  PRIVATE Threads::Threads)

add_executable(redlock-proxy ${CMAKE_CURRENT_LIST_DIR}/fault_proxy_main.cc)
redlock_internal_target(redlock-proxy)
target_link_libraries(redlock-proxy PRIVATE redlock::chaos_fault_proxy absl::strings absl::status)

if(REDLOCK_BUILD_TESTS)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  redlock_add_test(chaos_fault_proxy_test
    SOURCES ${PROJECT_SOURCE_DIR}/tests/chaos/fault_proxy_test.cc
    LIBS redlock::chaos_fault_proxy redlock::testkit absl::strings absl::time Threads::Threads
    LABELS chaos
    TIMEOUT 300)
  # The control-protocol test runs the binary.
  target_compile_definitions(chaos_fault_proxy_test PRIVATE
    REDLOCK_PROXY_PATH="$<TARGET_FILE:redlock-proxy>")
  add_dependencies(chaos_fault_proxy_test redlock-proxy)
endif()
