# chaos/checker.cmake: the JSONL history of a chaos run and the checker that
# proves or refutes S1..S4 from it (DESIGN.md section 7). Included from
# chaos/CMakeLists.txt.
#
#   redlock::chaos_checker  static library: chaos/history.h, chaos/nemesis.h,
#                           chaos/checker.h
#   redlock::chaos_plot     static library: chaos/plot.h, the timeline SVG
#   redlock-check           redlock-check HISTORY.jsonl [--json] [--plot FILE]
#   chaos_checker_test      unit test (no server)
#   chaos_plot_test         unit test of the timeline (no server)

find_package(nlohmann_json 3.2 REQUIRED)

add_library(redlock_chaos_checker STATIC
  ${CMAKE_CURRENT_LIST_DIR}/history.cc
  ${CMAKE_CURRENT_LIST_DIR}/nemesis.cc
  ${CMAKE_CURRENT_LIST_DIR}/checker.cc)
add_library(redlock::chaos_checker ALIAS redlock_chaos_checker)
redlock_internal_target(redlock_chaos_checker)
target_include_directories(redlock_chaos_checker PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_checker
  PUBLIC absl::status absl::statusor absl::strings absl::time
  PRIVATE absl::str_format absl::flat_hash_map absl::flat_hash_set
          nlohmann_json::nlohmann_json)

# The timeline picture of a history (chaos/plot.h).
add_library(redlock_chaos_plot STATIC ${CMAKE_CURRENT_LIST_DIR}/plot.cc)
add_library(redlock::chaos_plot ALIAS redlock_chaos_plot)
redlock_internal_target(redlock_chaos_plot)
target_include_directories(redlock_chaos_plot PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_plot
  PUBLIC redlock::chaos_checker absl::status
  PRIVATE redlock::svg absl::strings absl::str_format)

add_executable(redlock-check ${CMAKE_CURRENT_LIST_DIR}/check_main.cc)
redlock_internal_target(redlock-check)
target_link_libraries(redlock-check PRIVATE redlock::chaos_plot absl::strings absl::time)
