# Debian packages of redlock, made by CPack from the install rules
# (cmake/RedlockInstall.cmake): scripts/package.sh builds them.
#
#   libredlock-dev   the libraries (static), the public headers, the CMake
#                    package (find_package(redlock)) and redlock.pc; depends
#                    on the -dev packages a consumer compiles and links with
#   redlock          the `redlock` tool and its manual page; its dependencies
#                    are the shared libraries it loads, found by
#                    dpkg-shlibdeps (libabsl20220623, libhiredis0.14, libssl3,
#                    libc6, libstdc++6, libgcc-s1)
#
# Files go under /usr (CPack's DEB generator installs with
# CMAKE_INSTALL_PREFIX=/usr into its staging directory, so redlock.pc says
# prefix=/usr); configure with -DCMAKE_INSTALL_PREFIX=/usr for Debian's
# multiarch library directory (/usr/lib/x86_64-linux-gnu), as
# scripts/package.sh does.

# CPack installs through the "preinstall" target, which by default builds
# every target first: in a build with the tests, the chaos harness and the
# fuzz targets that is most of the project. Packaging needs only what it
# installs, which scripts/package.sh builds before it runs CPack (the same
# holds for `make install`; `cmake --install` never builds).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME redlock)
set(CPACK_PACKAGE_VENDOR "redlock")
set(REDLOCK_PACKAGE_MAINTAINER "redlock maintainers <maintainers@localhost>" CACHE STRING
    "The Maintainer field of the Debian packages: who builds them (scripts/package.sh --maintainer)")
set(CPACK_PACKAGE_CONTACT "${REDLOCK_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Distributed locks on N independent Redis masters (Redlock)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)

# One package per component.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev tool)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libredlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What a consumer of the static libraries compiles and links with:
# Abseil's CMake package and .pc files, hiredis through pkg-config (the
# CMake package looks it up that way), OpenSSL.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libabsl-dev, libhiredis-dev, libssl-dev, pkg-config")
# The fake fleet for users' tests (redlock::testing, find_package(redlock
# COMPONENTS testing)) runs the simulator's nodes, which need Lua 5.1 and
# nlohmann's JSON: without them that component is simply not found.
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "liblua5.1-0-dev, nlohmann-json3-dev")
# The Description's first line is CPACK_PACKAGE_DESCRIPTION_SUMMARY for both
# (CMake 3.25); these are the lines under it.
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Development files: the static libraries, the headers, the CMake package
(find_package(redlock)) and the pkg-config file (redlock.pc) of a C++17
library for the Redlock algorithm: one lock held across N independent
Redis masters, with renewal, fencing tokens, MultiLock, a mutex, a
reader-writer lock, a semaphore and leader election.")

set(CPACK_DEBIAN_TOOL_PACKAGE_NAME redlock)
set(CPACK_DEBIAN_TOOL_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOL_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_TOOL_DESCRIPTION
    "The redlock command-line tool: takes, releases, extends and inspects
Redlock locks from the shell, runs a command while holding one (renewed,
with the fencing token in its environment), and runs a command only while
this host leads an election. See redlock(1).")

include(CPack)
