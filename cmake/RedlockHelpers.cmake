# Build settings shared by every target of this project, carried by an
# interface target instead of global flags.
add_library(redlock_build_flags INTERFACE)
target_compile_options(redlock_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)
# Line tables only (-g1): what perf, gdb backtraces and the sanitizers'
# reports use, for about a quarter less compile and link time than full
# debug info (-g, which RelWithDebInfo passes first; the later -g1 wins).
if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  target_compile_options(redlock_build_flags INTERFACE -g1)
endif()
if(REDLOCK_SANITIZE STREQUAL "address")
  target_compile_options(redlock_build_flags INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g1)
  target_link_options(redlock_build_flags INTERFACE -fsanitize=address,undefined)
elseif(REDLOCK_SANITIZE STREQUAL "thread")
  # -O1: TSan at -O0 is very slow at run time; -g1: line tables suffice for
  # its reports and compile and link much faster than full debug info.
  target_compile_options(redlock_build_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer -O1 -g1)
  target_link_options(redlock_build_flags INTERFACE -fsanitize=thread)
elseif(NOT REDLOCK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "REDLOCK_SANITIZE must be '', 'address' or 'thread', not '${REDLOCK_SANITIZE}'")
endif()

if(REDLOCK_BUILD_FUZZERS)
  # Coverage feedback for libFuzzer in every target of the project (the
  # fuzzer binaries link -fsanitize=fuzzer, redlock_add_fuzz_target).
  target_compile_options(redlock_build_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()

# redlock_internal_target(<target>): C++20 inside the project (public headers
# stay C++17-clean), the shared flags, and the source root on the include path.
function(redlock_internal_target target)
  set_target_properties(${target} PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_link_libraries(${target} PRIVATE redlock_build_flags)
endfunction()

# redlock_internal_library(<name> <sources>...): a static library of the
# project's own code (not installed): target redlock_<name>, alias
# redlock::<name>, redlock_internal_target's settings, and the source root on
# the include path of the library and of what links it.
function(redlock_internal_library name)
  add_library(redlock_${name} STATIC ${ARGN})
  add_library(redlock::${name} ALIAS redlock_${name})
  redlock_internal_target(redlock_${name})
  target_include_directories(redlock_${name} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# redlock_precompiled_headers(<target>): with REDLOCK_PRECOMPILED_HEADERS, the
# standard and Abseil headers most of the target's files include, parsed once
# (a fifth to a third of a file's compile time here) instead of in every
# file. For the targets scripts/bench.sh builds: its first run compiles about
# a hundred files on two cores. With the header, GCC 12 reports
# -Warray-bounds (and, seen in a fresh clone's scripts/bench.sh run,
# -Wstringop-overflow and -Wstringop-overread) inside std::string's
# operator+ in redlock/internal/algorithm.cc and bench/report.cc, which do
# not warn without it: GCC 12's known false positives in its string code,
# silenced for these targets only while the option is on (the builds of
# scripts/setup.sh and CI keep the warnings).
function(redlock_precompiled_headers target)
  if(REDLOCK_PRECOMPILED_HEADERS)
    target_compile_options(${target} PRIVATE
      $<$<CXX_COMPILER_ID:GNU>:-Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread>)
    target_precompile_headers(${target} PRIVATE
      <algorithm> <atomic> <chrono> <functional> <map> <memory> <mutex> <optional> <string>
      <thread> <utility> <vector>
      <absl/functional/any_invocable.h> <absl/status/status.h> <absl/status/statusor.h>
      <absl/strings/str_cat.h> <absl/strings/str_format.h> <absl/strings/string_view.h>
      <absl/time/time.h>)
  endif()
endfunction()

# redlock_test_code(<target>): test code is compiled without optimisation in
# an optimised build: GoogleTest's templates take about 2.4x longer at -O2,
# and what the tests measure runs in the libraries, which keep theirs.
# The same in a TSan build, whose libraries are built at -O1.
function(redlock_test_code target)
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo" OR CMAKE_BUILD_TYPE STREQUAL "Release" OR
     REDLOCK_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()

# redlock_add_test(<name> LABELS unit|integration|chaos [TIMEOUT s] [SHARDS n]
#                  SOURCES src... [LIBS lib...] [DEFINITIONS def...] [DEPENDS target...])
# redlock_add_test(<name> LABELS ... [TIMEOUT s] COMMAND cmd args... [SKIP_RETURN_CODE n])
# One ctest entry with a label (default timeout 300 s): a GoogleTest binary
# built from SOURCES (DEPENDS: targets it runs, built before it), or any
# COMMAND (a target name as cmd runs that target's binary). SHARDS n (a
# GoogleTest binary only) registers n entries instead, <name>_1of<n> ...,
# each running every n-th test of the binary (GoogleTest's sharding), so that
# a long binary does not keep one core busy after the others are done under
# ctest -j.
# Every test of the project is registered through this, in tests/CMakeLists.txt.
function(redlock_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;SKIP_RETURN_CODE;SHARDS" "SOURCES;LIBS;LABELS;DEFINITIONS;DEPENDS;COMMAND" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "redlock_add_test(${name}): LABELS is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(ARG_SOURCES)
    add_executable(${name} ${ARG_SOURCES})
    redlock_internal_target(${name})
    redlock_test_code(${name})
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest_main)
    if(ARG_DEFINITIONS)
      target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
    endif()
    if(ARG_DEPENDS)
      add_dependencies(${name} ${ARG_DEPENDS})
    endif()
    set(entries ${name})
    if(ARG_SHARDS)
      set(entries)
      math(EXPR last "${ARG_SHARDS} - 1")
      foreach(i RANGE ${last})
        math(EXPR n "${i} + 1")
        set(entry ${name}_${n}of${ARG_SHARDS})
        add_test(NAME ${entry} COMMAND ${name})
        set_property(TEST ${entry} APPEND PROPERTY ENVIRONMENT
          "GTEST_TOTAL_SHARDS=${ARG_SHARDS}" "GTEST_SHARD_INDEX=${i}")
        list(APPEND entries ${entry})
      endforeach()
    else()
      add_test(NAME ${name} COMMAND ${name})
    endif()
  elseif(ARG_COMMAND)
    set(entries ${name})
    add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  else()
    message(FATAL_ERROR "redlock_add_test(${name}): SOURCES or COMMAND is required")
  endif()
  foreach(entry IN LISTS entries)
    set_tests_properties(${entry} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
    if(ARG_SKIP_RETURN_CODE)
      set_tests_properties(${entry} PROPERTIES SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
    endif()
    redlock_sanitizer_environment(${entry})
  endforeach()
endfunction()

# redlock_sanitizer_environment(<test>): sanitizer runtime options for a ctest
# entry (TSan needs the Abseil suppressions, see tests/tsan.supp).
function(redlock_sanitizer_environment test)
  if(REDLOCK_SANITIZE STREQUAL "thread")
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1")
  elseif(REDLOCK_SANITIZE STREQUAL "address")
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      "ASAN_OPTIONS=detect_leaks=1 abort_on_error=1" "UBSAN_OPTIONS=print_stacktrace=1 halt_on_error=1")
  endif()
endfunction()

# redlock_add_fuzz_target(<name> ENTRY <function> SOURCES src... [LIBS lib...])
# One fuzz target (fuzz/README.md): SOURCES define the entry function
# redlock::fuzz::<function>(const uint8_t*, size_t) declared in
# fuzz/entries.h; the target's kept inputs are fuzz/<name>/corpus (seeds) and
# fuzz/<name>/regressions (inputs of crashes found and fixed). Makes:
#   fuzz_<name>_regressions  with REDLOCK_BUILD_TESTS, any compiler: a unit
#                            test that runs every kept input through the entry
#   fuzz_<name>              with REDLOCK_BUILD_FUZZERS (clang): the libFuzzer
#                            binary (scripts/fuzz.sh runs it over the corpus)
function(redlock_add_fuzz_target name)
  cmake_parse_arguments(ARG "" "ENTRY" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_ENTRY OR NOT ARG_SOURCES)
    message(FATAL_ERROR "redlock_add_fuzz_target(${name}): ENTRY and SOURCES are required")
  endif()
  set(entry redlock_fuzz_${name}_entry)
  add_library(${entry} STATIC ${ARG_SOURCES})
  redlock_internal_target(${entry})
  target_include_directories(${entry} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${entry} PUBLIC redlock_fuzz_check ${ARG_LIBS})
  if(REDLOCK_BUILD_TESTS)
    redlock_add_test(fuzz_${name}_regressions LABELS unit
      SOURCES ${PROJECT_SOURCE_DIR}/fuzz/regressions_test.cc LIBS ${entry}
      DEFINITIONS REDLOCK_FUZZ_ENTRY=${ARG_ENTRY}
                  REDLOCK_FUZZ_DIR="${PROJECT_SOURCE_DIR}/fuzz/${name}")
  endif()
  if(REDLOCK_BUILD_FUZZERS)
    add_executable(fuzz_${name} ${PROJECT_SOURCE_DIR}/fuzz/fuzzer_main.cc)
    redlock_internal_target(fuzz_${name})
    target_compile_definitions(fuzz_${name} PRIVATE REDLOCK_FUZZ_ENTRY=${ARG_ENTRY})
    target_link_libraries(fuzz_${name} PRIVATE ${entry})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()

# redlock_subdirectory_if(<dir> <condition>...): add_subdirectory(<dir>) when
# the if() condition holds. A macro, so that the subdirectory's parent scope
# is the caller's, as with a plain add_subdirectory.
macro(redlock_subdirectory_if dir)
  if(${ARGN})
    add_subdirectory(${dir})
  endif()
endmacro()
