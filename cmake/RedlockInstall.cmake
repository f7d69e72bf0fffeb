# Install rules and the redlock:: package (docs/install.md).
#
#   cmake --install build --prefix /opt/redlock
#
# installs
#   include/redlock/*.h, include/multilock/multi_lock.h   the public headers
#   lib/libredlock.a, lib/libredlock_multilock.a           (or .so with BUILD_SHARED_LIBS)
#   lib/cmake/redlock/                                      find_package(redlock): redlock::redlock, redlock::multilock
#   lib/pkgconfig/redlock.pc                                pkg-config --cflags --libs redlock
#   bin/redlock                                             the command-line tool (tools/README.md)
#   share/man/man1/redlock.1.gz                             its manual page (its --help texts)
#
# Every rule belongs to a component, which is one Debian package
# (cmake/RedlockPackage.cmake): `dev` (libredlock-dev: libraries, headers,
# CMake package, pkg-config file) and `tool` (redlock: the tool and its
# manual page). `cmake --install` without --component installs both.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(REDLOCK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/redlock)
set(_redlock_targets redlock)
if(TARGET redlock_multilock)
  list(APPEND _redlock_targets redlock_multilock)
endif()
install(TARGETS ${_redlock_targets} EXPORT redlockTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The libraries link redlock_build_flags privately. For static libraries
# CMake still exports it (as a link-only dependency): it carries no compile
# flags to consumers, only the sanitizer link options of a sanitized build,
# which a consumer of such a build needs.
set_target_properties(redlock_build_flags PROPERTIES EXPORT_NAME build_flags_internal)
install(TARGETS redlock_build_flags EXPORT redlockTargets COMPONENT dev)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/redlock/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redlock
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "internal" EXCLUDE)
if(TARGET redlock_multilock)
  install(FILES ${PROJECT_SOURCE_DIR}/multilock/multi_lock.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/multilock COMPONENT dev)
endif()
if(TARGET redlock-cli)
  install(TARGETS redlock-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tool)
  # The manual page: the tool's --help and every command's, made by the
  # built tool (tools/make-man.sh).
  set(_redlock_man ${PROJECT_BINARY_DIR}/redlock.1.gz)
  add_custom_command(OUTPUT ${_redlock_man}
    COMMAND ${PROJECT_SOURCE_DIR}/tools/make-man.sh $<TARGET_FILE:redlock-cli> ${PROJECT_VERSION}
            ${PROJECT_BINARY_DIR}/redlock.1
    COMMAND gzip -9nf ${PROJECT_BINARY_DIR}/redlock.1
    DEPENDS redlock-cli ${PROJECT_SOURCE_DIR}/tools/make-man.sh
    COMMENT "Manual page redlock.1 from the tool's --help")
  add_custom_target(redlock_man ALL DEPENDS ${_redlock_man})
  install(FILES ${_redlock_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tool)
endif()

install(EXPORT redlockTargets NAMESPACE redlock:: DESTINATION ${REDLOCK_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/redlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/redlockConfig.cmake INSTALL_DESTINATION ${REDLOCK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/redlockConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/redlockConfig.cmake ${PROJECT_BINARY_DIR}/redlockConfigVersion.cmake
        DESTINATION ${REDLOCK_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config. The modules required are derived from what the libraries
# link (absl::<name> -> absl_<name>: Debian ships an absl_<name>.pc for each
# Abseil target; PkgConfig::HIREDIS -> hiredis; OpenSSL::SSL/Crypto ->
# libssl/libcrypto), so the file follows
# redlock/CMakeLists.txt. Static libraries need every dependency on a plain
# `pkg-config --libs redlock` line, so they all go in Requires; a shared
# build needs only the public ones there.
set(_redlock_pc_public "")
set(_redlock_pc_private "")
foreach(_tgt redlock redlock_multilock)
  if(NOT TARGET ${_tgt})
    continue()
  endif()
  get_target_property(_iface ${_tgt} INTERFACE_LINK_LIBRARIES)
  get_target_property(_all ${_tgt} LINK_LIBRARIES)
  foreach(_kind public private)
    set(_libs "${_all}")
    if(_kind STREQUAL "public")
      set(_libs "${_iface}")
    endif()
    foreach(_lib IN LISTS _libs)
      if(_lib MATCHES "^\\$<LINK_ONLY:" OR _lib MATCHES "^(redlock|redlock::|redlock_|Threads::)")
        continue()  # link-only entries are in LINK_LIBRARIES; our own targets; -pthread below
      elseif(_lib MATCHES "^absl::(.+)$")
        set(_module "absl_${CMAKE_MATCH_1}")
      elseif(_lib STREQUAL "PkgConfig::HIREDIS")
        set(_module hiredis)
      elseif(_lib STREQUAL "OpenSSL::SSL")
        set(_module libssl)
      elseif(_lib STREQUAL "OpenSSL::Crypto")
        set(_module libcrypto)
      else()
        message(WARNING "redlock.pc: no pkg-config module known for ${_tgt}'s dependency ${_lib}")
        continue()
      endif()
      if(NOT _module IN_LIST _redlock_pc_public)
        list(APPEND _redlock_pc_${_kind} ${_module})
      endif()
    endforeach()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _redlock_pc_public)
list(REMOVE_DUPLICATES _redlock_pc_private)
if(_redlock_pc_public)
  list(REMOVE_ITEM _redlock_pc_private ${_redlock_pc_public})
endif()
get_target_property(_redlock_type redlock TYPE)
if(_redlock_type STREQUAL "STATIC_LIBRARY")
  list(JOIN _redlock_pc_public " " _public)
  list(JOIN _redlock_pc_private " " _private)
  string(STRIP "${_public} ${_private}" REDLOCK_PC_REQUIRES)
  set(REDLOCK_PC_REQUIRES_PRIVATE "")
  set(REDLOCK_PC_LIBS_EXTRA "-pthread")
  set(REDLOCK_PC_LIBS_PRIVATE "")
else()
  list(JOIN _redlock_pc_public " " REDLOCK_PC_REQUIRES)
  list(JOIN _redlock_pc_private " " REDLOCK_PC_REQUIRES_PRIVATE)
  set(REDLOCK_PC_LIBS_EXTRA "")
  set(REDLOCK_PC_LIBS_PRIVATE "-pthread")
endif()
# A sanitized build's libraries need the sanitizer runtime at link time.
# The build flags reach the exported targets only as a link-only dependency,
# whose link options CMake does not pass on: state them on the installed
# interface, and in the .pc file.
set(_redlock_sanitize_link "")
if(REDLOCK_SANITIZE STREQUAL "address")
  set(_redlock_sanitize_link "-fsanitize=address,undefined")
elseif(REDLOCK_SANITIZE STREQUAL "thread")
  set(_redlock_sanitize_link "-fsanitize=thread")
endif()
if(_redlock_sanitize_link)
  foreach(_tgt ${_redlock_targets})
    target_link_options(${_tgt} INTERFACE $<INSTALL_INTERFACE:${_redlock_sanitize_link}>)
  endforeach()
  string(APPEND REDLOCK_PC_LIBS_EXTRA " ${_redlock_sanitize_link}")
endif()
string(STRIP "${REDLOCK_PC_LIBS_EXTRA}" REDLOCK_PC_LIBS_EXTRA)
if(TARGET redlock_multilock)
  set(REDLOCK_PC_LIBS "-lredlock_multilock -lredlock")
else()
  set(REDLOCK_PC_LIBS "-lredlock")
endif()
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(REDLOCK_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(REDLOCK_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
# The prefix is only known at install time (`cmake --install --prefix`
# overrides CMAKE_INSTALL_PREFIX then): configure everything else now, and
# the prefix when installing.
set(REDLOCK_PC_PREFIX "@REDLOCK_PC_INSTALL_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/redlock.pc.in ${PROJECT_BINARY_DIR}/redlock.pc.stage @ONLY)
install(CODE "
  set(REDLOCK_PC_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/redlock.pc.stage\" \"${PROJECT_BINARY_DIR}/redlock.pc\" @ONLY)
" COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/redlock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)
foreach(_var _redlock_type _redlock_pc_public _redlock_pc_private _redlock_sanitize_link _dir _tgt
             _iface _all _kind _libs _lib _module _public _private)
  unset(${_var})
endforeach()
