#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for redlock and builds it.
#
#   scripts/setup.sh [--build-dir DIR] [--sanitize address|thread] [--build-type TYPE]
#                    [--no-build] [--backends] [--fuzz] [--no-lab-clients]
#                    [-DCMAKE_OPTION=VALUE ...]
#
# 1. Installs the Debian packages the project needs when run as root; as any
#    other user it prints the exact apt-get line to run and stops. With
#    --backends also the lock services compared with this library (etcd,
#    ZooKeeper with its C client, PostgreSQL with libpq; backends/README.md).
#    With --fuzz also clang and its libFuzzer runtime (scripts/fuzz.sh).
#    Then the other Redlock clients the chaos harness tests (node-redlock,
#    redis-py's Lock) through scripts/lab-clients.sh, unless --no-lab-clients.
# 2. Configures with CMake and builds everything (library, tests, bench,
#    chaos, tools, examples) into DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
sanitize=""
build_type=RelWithDebInfo
do_build=1
backends=0
lab_clients=1
fuzz=0
cmake_args=()
while (($#)); do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --sanitize) sanitize="$2"; shift 2 ;;
    --build-type) build_type="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --backends) backends=1; shift ;;
    --no-lab-clients) lab_clients=0; shift ;;
    --fuzz) fuzz=1; shift ;;
    -D*) cmake_args+=("$1"); shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake pkg-config           # toolchain
  libhiredis-dev libabsl-dev libssl-dev      # library dependencies (OpenSSL: TLS to the nodes)
  openssl                                    # throw-away certificates for the TLS tests
  clang-format git                           # the format check (scripts/format.sh --check, a unit test)
  doxygen                                    # the API reference (scripts/docs.sh, a unit test)
  python3                                    # the Markdown link check (scripts/check-links.py, a unit test)
  libgtest-dev libgmock-dev libbenchmark-dev # tests and benchmarks
  libpugixml-dev                             # the SVG tests read the pictures as XML
  nlohmann-json3-dev                         # bench/chaos JSON output
  libyaml-cpp-dev                            # chaos scenario files (chaos/scenarios/*.yaml)
  liblua5.1-0-dev                            # the simulator's nodes run the scripts as written (sim/)
  redis-server                               # the servers tests and bench start
  redis-sentinel                             # Sentinel failovers (replicated-node tests, chaos)
  iproute2 nftables                          # chaos partitions (network namespaces, nft rules)
  docker-compose                             # offline validation of docker-compose.yml
)
if ((backends)); then
  packages+=(
    etcd-server libcurl4-openssl-dev         # a 3-member etcd cluster (backends/servers.h), its HTTP client
    zookeeper libzookeeper-mt-dev            # a 3-member ensemble (Java) and its C client
    postgresql libpq-dev                     # the database and libpq
  )
fi
if ((fuzz)); then
  packages+=(
    clang libclang-rt-14-dev                 # -fsanitize=fuzzer (libFuzzer), fuzz/README.md
  )
fi
scripts/install-packages.sh "${packages[@]}"

# The external clients under test (chaos/README.md, "Any client under test").
((lab_clients)) && scripts/lab-clients.sh

((do_build)) || exit 0
# Every part on, explicitly, and no precompiled headers (ccache caches no
# compile that uses one): a build directory scripts/bench.sh configured
# (REDLOCK_BUILD_DIR) becomes a complete one. The -D options given to
# setup.sh come last and win (.ci/run's sanitizer builds).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DREDLOCK_SANITIZE="$sanitize" \
  -DREDLOCK_BUILD_TESTS=ON -DREDLOCK_BUILD_BENCH=ON -DREDLOCK_BUILD_MICROBENCHMARKS=ON \
  -DREDLOCK_BUILD_CHAOS=ON -DREDLOCK_BUILD_TOOLS=ON -DREDLOCK_BUILD_EXAMPLES=ON \
  -DREDLOCK_PRECOMPILED_HEADERS=OFF \
  "${cmake_args[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
