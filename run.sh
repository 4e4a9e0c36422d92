#!/usr/bin/env bash
# tidegate's one entry point. Every subcommand installs what is missing and builds first, so a
# fresh machine needs nothing but this script.
#
#   ./run.sh setup    install the Debian packages tidegate needs (when missing)
#   ./run.sh build    setup + configure + compile (build/)
#   ./run.sh demo     build + 4-rank comparison of tidegate's allreduce with MPI_Allreduce
#   ./run.sh test     build + the whole test suite (CTest)
#   ./run.sh bench    build + the benchmarks recorded in bench/RESULTS.md (see bench/README)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_DIR="${TIDEGATE_BUILD_DIR:-$ROOT/build}"
JOBS="$(nproc)"

# Debian packages: compilers and CUDA come with the machine; these are what tidegate adds.
PACKAGES=(
  cmake ninja-build pkg-config g++ clang
  libssl-dev                      # OpenSSL libcrypto: HMAC authentication, CSPRNG
  libgtest-dev libgmock-dev       # tests
  libbenchmark-dev                # micro-benchmarks
  libopenmpi-dev openmpi-bin      # MPI bootstrap, MPI baseline and (later) MPI transport
  libucx-dev ucx-utils            # UCX transport
  iproute2                        # emulated cluster: network namespaces, veth, tc tbf
  procps                          # pkill/ps used by test teardown
)

log() { printf '\033[1m[run.sh]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

cmd_setup() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

cmd_build() {
  cmd_setup
  local werror=OFF
  # Warnings are always on; CI makes them fatal.
  if [ "${CI:-}" = "true" ] || [ "${TIDEGATE_WERROR:-}" = "1" ]; then werror=ON; fi
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    log "configuring $BUILD_DIR"
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTIDEGATE_WARNINGS_AS_ERRORS="$werror"
  else
    cmake "$BUILD_DIR" -DTIDEGATE_WARNINGS_AS_ERRORS="$werror" >/dev/null
  fi
  log "building"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# mpirun as root on a small machine needs these (see the README's machine notes).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cmd_demo() {
  cmd_build
  log "4 local ranks, 1 KiB to 64 MiB float32 sum: tidegate (transport auto: the measured plan picks tcp, mpi or ucx per size) vs MPI_Allreduce (Open MPI, TCP BTL)"
  mpirun -np 4 --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo \
    --mca pml ob1 "$BUILD_DIR/bench/tidegate_bench/tidegate-bench" -b 1K -e 64M -f 4 -n 10 -w 3 -c 1 --baseline mpi "$@"
}

cmd_test() {
  cmd_build
  log "running the test suite"
  ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "$JOBS" "$@"
}

cmd_bench() {
  cmd_build
  "$ROOT/bench/run_benchmarks.sh" "$BUILD_DIR" "$@"
}

sub="${1:-}"
[ $# -gt 0 ] && shift
case "$sub" in
  setup) cmd_setup "$@" ;;
  build) cmd_build "$@" ;;
  demo) cmd_demo "$@" ;;
  test) cmd_test "$@" ;;
  bench) cmd_bench "$@" ;;
  *)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac
