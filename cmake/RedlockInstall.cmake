# Install rules and the redlock:: package (find_package(redlock)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(REDLOCK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/redlock)
set(_redlock_targets redlock)
if(TARGET redlock_multilock)
  list(APPEND _redlock_targets redlock_multilock)
endif()
install(TARGETS ${_redlock_targets} redlock_build_flags EXPORT redlockTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/redlock/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redlock
        FILES_MATCHING PATTERN "*.h" PATTERN "internal" EXCLUDE)
if(TARGET redlock_multilock)
  install(FILES ${PROJECT_SOURCE_DIR}/multilock/multi_lock.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/multilock)
endif()
install(EXPORT redlockTargets NAMESPACE redlock:: DESTINATION ${REDLOCK_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/redlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/redlockConfig.cmake INSTALL_DESTINATION ${REDLOCK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/redlockConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/redlockConfig.cmake ${PROJECT_BINARY_DIR}/redlockConfigVersion.cmake
        DESTINATION ${REDLOCK_INSTALL_CMAKEDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/redlock.pc.in ${PROJECT_BINARY_DIR}/redlock.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/redlock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
