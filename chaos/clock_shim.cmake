# chaos/clock_shim.cmake: the clock shim and its controller (DESIGN.md sections
# 2 and 7). Included from chaos/CMakeLists.txt.
#
#   redlock::clock_shim          libredlock_clock_shim.so, an LD_PRELOAD library
#                                (plain C, no C++ runtime) that shifts a process's
#                                clocks by offsets read from a control file
#   redlock::chaos_clock_control static library: chaos/clock_control.h (writes
#                                the control file; knows the path of the .so)
#
# The shim is deliberately NOT linked with redlock_build_flags: it is
# preloaded into unsanitized processes (redis-server, the test's clock probe),
# where an ASan/TSan runtime would refuse to load, so it keeps the same flags
# in every build, sanitized or not.

add_library(redlock_clock_shim SHARED ${CMAKE_CURRENT_LIST_DIR}/clock_shim.c)
add_library(redlock::clock_shim ALIAS redlock_clock_shim)
set_target_properties(redlock_clock_shim PROPERTIES
  C_STANDARD 11
  C_STANDARD_REQUIRED ON
  C_EXTENSIONS ON
  C_VISIBILITY_PRESET hidden
  POSITION_INDEPENDENT_CODE ON
  LINKER_LANGUAGE C)
target_compile_options(redlock_clock_shim PRIVATE -Wall -Wextra)
target_link_options(redlock_clock_shim PRIVATE -Wl,--no-undefined -Wl,-z,now)

add_library(redlock_chaos_clock_control STATIC ${CMAKE_CURRENT_LIST_DIR}/clock_control.cc)
add_library(redlock::chaos_clock_control ALIAS redlock_chaos_clock_control)
redlock_internal_target(redlock_chaos_clock_control)
target_include_directories(redlock_chaos_clock_control PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(redlock_chaos_clock_control
  PUBLIC absl::status absl::statusor absl::time Threads::Threads
  PRIVATE absl::strings absl::str_format)
# ClockControl::ShimLibraryPath() names the .so of this build tree.
target_compile_definitions(redlock_chaos_clock_control
  PRIVATE REDLOCK_CLOCK_SHIM_PATH="$<TARGET_FILE:redlock::clock_shim>")
add_dependencies(redlock_chaos_clock_control redlock_clock_shim)
