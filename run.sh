#!/usr/bin/env bash
# tidegate's one entry point. Every subcommand installs what is missing and builds first, so a
# fresh machine needs nothing but this script.
#
#   ./run.sh setup    install the Debian packages tidegate needs (when missing) and the Python
#                     environment .venv (torch, numpy, pytest, scikit-learn, matplotlib)
#   ./run.sh build    setup + configure + compile (build/)
#   ./run.sh demo     build + 4-rank comparison of tidegate's allreduce with MPI_Allreduce
#   ./run.sh test     build + the whole test suite (CTest), the PyTorch backend's tests, then the
#                     ASan+UBSan and TSan sanitizer stages (below)
#   ./run.sh sanitize [asan|tsan]   the suite's library-exercising tests built and run under
#                     AddressSanitizer + UndefinedBehaviorSanitizer and ThreadSanitizer
#   ./run.sh pytest   build + install the PyTorch backend into .venv + its tests (pytest) only
#   ./run.sh bench    build + the benchmarks recorded in bench/RESULTS.md (see bench/README)
#   ./run.sh soak --minutes N   4 ranks of random, checked collectives for N minutes (build/);
#                     RSS, descriptors and threads sampled; judged by bench/soak/summarise_soak.py
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
  zlib1g-dev                      # the example trainer reads the gzipped digits data
  nlohmann-json3-dev              # tidegate-bench --step reads the model profiles (JSON)
  libopenmpi-dev openmpi-bin      # MPI bootstrap, MPI baseline and (later) MPI transport
  libucx-dev ucx-utils            # UCX transport
  iproute2                        # emulated cluster: network namespaces, veth, tc tbf
  procps                          # pkill/ps used by test teardown
  python3-venv                    # the Python environment of the PyTorch backend (.venv)
)

# The Python environment: project-local, kept between runs. Its wheels are kept outside the
# repository (pip's own HTTP cache stores nothing on these machines), so neither a second run
# nor a clean clone on the same machine downloads torch (3 GB with its CUDA libraries) again.
VENV="${TIDEGATE_VENV:-$ROOT/.venv}"
WHEELHOUSE="${TIDEGATE_WHEELHOUSE:-$HOME/.cache/tidegate-pip/wheels}"
PYTHON_PACKAGES=(torch numpy pytest scikit-learn matplotlib)
PYTHON_MODULES="torch, numpy, pytest, sklearn, matplotlib"

log() { printf '\033[1m[run.sh]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

cmd_setup() {
  setup_packages
  setup_python
}

setup_packages() {
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

setup_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating the Python environment $VENV"
    "${TIDEGATE_PYTHON:-python3}" -m venv "$VENV" || return
  fi
  # The backend compiles against this environment's torch, so its build must not be isolated.
  # pip reads a config value as its option's destination (build_isolation): false = off.
  printf '[install]\nno-build-isolation = false\n' >"$VENV/pip.conf"
  if "$VENV/bin/python" -c "import $PYTHON_MODULES" 2>/dev/null; then return; fi
  mkdir -p "$WHEELHOUSE"
  log "installing ${PYTHON_PACKAGES[*]} into $VENV (wheels kept in $WHEELHOUSE)"
  if ! "$VENV/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" "${PYTHON_PACKAGES[@]}"; then
    log "downloading the missing wheels into $WHEELHOUSE"
    "$VENV/bin/pip" download -q --dest "$WHEELHOUSE" "${PYTHON_PACKAGES[@]}" &&
      "$VENV/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" "${PYTHON_PACKAGES[@]}"
  fi
}

# Builds need only the Debian packages; the Python environment comes with the tests.
cmd_build() {
  setup_packages
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

# Each test stage's verdict, printed again when `./run.sh test` ends: CI shows only the tail of
# a long log, and a failure in the first stage would otherwise be buried under the later ones.
STAGE_VERDICTS=()

# record_stage NAME STATUS [CTEST_DIR [FAILED_TESTS]]: notes a stage's verdict, with the tests
# that failed in it (given, or as CTest lists them in Testing/Temporary/LastTestsFailed.log).
record_stage() {
  local name=$1 status=$2 dir=${3:-} failed=${4:-}
  if [ "$status" -ne 0 ] && [ -z "$failed" ] && [ -n "$dir" ] &&
    [ -f "$dir/Testing/Temporary/LastTestsFailed.log" ]; then
    failed=$(cut -d: -f2- "$dir/Testing/Temporary/LastTestsFailed.log" | paste -sd' ')
  fi
  if [ "$status" -ne 0 ] && [ -n "$dir" ]; then keep_failed_output "$dir"; fi
  if [ "$status" -eq 0 ]; then STAGE_VERDICTS+=("$name: passed"); else
    STAGE_VERDICTS+=("$name: FAILED (status $status)${failed:+; failed tests: $failed}"); fi
}

# What each failed CTest test printed, kept for the end of `./run.sh test`: CI shows only the
# tail of the log, so a failure's own words would otherwise scroll away under the later stages.
FAILED_OUTPUT_FILE=$(mktemp)
trap 'rm -f "$FAILED_OUTPUT_FILE"' EXIT

# keep_failed_output CTEST_DIR: the last 60 lines of each failed test's output (from CTest's
# LastTest.log; UCX's per-descriptor "not matched" warnings left out, they are noise).
keep_failed_output() {
  local dir=$1 name
  local list="$dir/Testing/Temporary/LastTestsFailed.log" log_file="$dir/Testing/Temporary/LastTest.log"
  [ -f "$list" ] && [ -f "$log_file" ] || return 0
  for name in $(cut -d: -f2- "$list"); do
    {
      echo "---- output of $name (last 60 lines) ----"
      awk -v name="$name" '
        $0 ~ ("Testing: " name "$") { inside = 1; next }
        inside && $0 ~ ("^\"" name "\" end time") { inside = 0 }
        inside' "$log_file" | grep -v "was not matched" | tail -n 60
    } >>"$FAILED_OUTPUT_FILE"
  done
}

print_stage_verdicts() {
  local v
  if [ -s "$FAILED_OUTPUT_FILE" ]; then
    log "what the failed tests printed:"
    cat "$FAILED_OUTPUT_FILE"
  fi
  log "summary of the test stages:"
  for v in "${STAGE_VERDICTS[@]}"; do log "  $v"; done
}

# The whole suite, each test run once, in the most revealing build that can run it:
#   1. the ASan+UBSan build and the tests of its set (below), which is most of the suite;
#   2. the main build (RelWithDebInfo) and every test of it that stage 1 did not run: the fault
#      matrix, fuzzers, examples, benchmarks' checks, GPU tests (skipped without a device), the
#      tests too big for shadow memory, and all of the suite if stage 1 could not be built;
#   3. the PyTorch backend's tests (pytest) on the main build's library;
#   4. the TSan build and its set (the threads of engine, transport, store and sessions).
# Measured on a clean clone on this 2-core kind of machine (27.5 min in all, torch's wheels
# cached): main build 4.5 min, asan 9 (build 5.5, tests 3.5), rest of the suite 4, pytest with
# the backend's build 3.5, tsan 6.5 (build 2, tests 4.5); a first torch download adds ~2. The
# same suite run twice over (main build, then both sanitizers) took 46.5 min in CI. Every
# stage runs even when an earlier one failed, so that one run reports them all.
cmd_test() {
  cmd_build
  log "running the test suite"
  local status=0 stage=0
  sanitize_run asan "address,undefined" || status=$((status | 1))
  main_suite_rest "$@" || status=$((status | 1))
  stage=0
  python_tests || stage=$?
  record_stage "PyTorch backend tests (tests/python)" "$stage" "" "${PYTEST_FAILED:-}"
  status=$((status | stage))
  sanitize_run tsan "thread" || status=$((status | 1))
  print_stage_verdicts
  return "$status"
}

# ctest_names DIR ARGS...: the names of the tests `ctest ARGS` would run in DIR, one per line.
ctest_names() {
  local dir=$1
  shift
  ctest --test-dir "$dir" -N "$@" | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' | LC_ALL=C sort
}

# as_name_regex: stdin's names as one anchored regex for ctest -R (regex characters escaped).
as_name_regex() {
  local names
  names=$(sed 's/[]().*+?^$|[\\]/\\&/g' | paste -sd'|')
  [ -n "$names" ] && printf '^(%s)$' "$names"
}

# Stage 2: the main build's tests that the asan stage did not run. Those that the asan set's
# pattern does not name run in one ctest call; those it names but the asan build did not run
# (excluded there, not built there, or the asan build failed) in a second one, by name.
main_suite_rest() {
  local asan_dir="$BUILD_DIR/sanitize-asan" status=0 part=0 leftover
  ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "$JOBS" \
    -E "$SANITIZE_ASAN_TESTS" "$@" || part=$?
  record_stage "CTest suite ($BUILD_DIR), tests outside the asan set" "$part" "$BUILD_DIR"
  status=$part part=0
  local names
  names=$(LC_ALL=C comm -23 <(ctest_names "$BUILD_DIR" -R "$SANITIZE_ASAN_TESTS") \
    <(ctest_names "$asan_dir" -R "$SANITIZE_ASAN_TESTS" -E "$SANITIZE_ASAN_EXCLUDE"))
  # Hundreds of names (the asan build failed) would pass ctest's regex size limit: the whole set.
  if [ "$(printf '%s\n' "$names" | grep -c .)" -gt 300 ]; then leftover=$SANITIZE_ASAN_TESTS
  else leftover=$(printf '%s\n' "$names" | grep . | as_name_regex || true); fi
  if [ -n "$leftover" ]; then
    ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "$JOBS" -R "$leftover" "$@" ||
      part=$?
    record_stage "CTest suite ($BUILD_DIR), tests of the asan set it did not run" "$part" "$BUILD_DIR"
    status=$((status | part))
  fi
  return "$status"
}

# The sanitizer stage. Each sanitizer set gets its own build of the library and the tests that
# exercise it (CUDA, NCCL, PyTorch and the benchmarks left out: nvcc does not instrument, and
# the Python tests load an uninstrumented interpreter), in $BUILD_DIR/sanitize-<name>, at -O1
# with line tables: about half the compile time of -O2 -g, and reports still name file and
# line. Every report is fatal, so a finding fails its test.
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer (cmake/TidegateSanitizers.cmake) on the
#         codecs, collectives (every transport), engine, store, plan, and multi-process jobs.
#         LeakSanitizer is on, except in the jobs that run under mpirun: Open MPI unloads its
#         plugins before exit, so their one-off allocations cannot be attributed to a library
#         and no suppression can match them (tests/sanitizers/lsan.supp has the rest).
#   tsan: ThreadSanitizer on what runs threads of ours: the engine, the tcp transport, the
#         store, the in-process collectives and sessions over tcp, and multi-process jobs. The
#         collectives over the in-process loopback are left out (each rank's algorithm is
#         single-threaded there, and they are two thirds of the set's time), and so are UCX
#         and MPI collectives: those libraries are not instrumented, so their own threads
#         would be reported as races. UCX's memory hooks are turned off for it: libucm patches
#         madvise, which glibc calls as a thread ends, into code TSan crashes in.
SANITIZE_ASAN_TESTS='^(unit|compress|collectives|engine|bootstrap|select|transport_tcp|transport_ucx|transport_mpi|conformance|multirank|proc)\.'
# Left to the main build: the two tests of 12 GiB (with shadow memory, beyond this machine), and
# the mpirun jobs under Open MPI's shared-memory and UCX set-ups, whose tidegate code is the
# tcp set-up's (proc.mpirun.tcp.*, run here); they differ only inside Open MPI.
SANITIZE_ASAN_EXCLUDE='collectives\.compressed_large|compress\.LargeTensor|proc\.mpirun\.(vader|ucx)\.'
SANITIZE_TSAN_TESTS='^(unit|engine|bootstrap|transport_tcp|collectives|multirank|proc\.tidegate_run)\.'
SANITIZE_TSAN_EXCLUDE='collectives\.compressed_large|collectives\.loopback|collectives\.ucx|/ucx|ucx/'
SANITIZE_ASAN_TARGET_DIRS=(tests/unit tests/compress tests/collectives tests/engine tests/bootstrap tests/select
  tests/transport_tcp tests/transport_ucx tests/transport_mpi tests/transport_conformance tests/multirank src/tools)
# Only what the tsan set runs is built for it.
SANITIZE_TSAN_TARGET_DIRS=(tests/unit tests/collectives tests/engine tests/bootstrap tests/transport_tcp
  tests/multirank src/tools)

cmd_sanitize() {
  setup_packages
  local which="${1:-all}" status=0
  case "$which" in
    asan) sanitize_run asan "address,undefined" || status=$? ;;
    tsan) sanitize_run tsan "thread" || status=$? ;;
    all)
      sanitize_run asan "address,undefined" || status=$?
      sanitize_run tsan "thread" || status=$?
      ;;
    *) echo "run.sh sanitize: asan, tsan or nothing (both)" >&2; return 2 ;;
  esac
  return "$status"
}

# sanitize_run NAME SANITIZERS: configures, builds and runs one sanitizer set.
sanitize_run() {
  local name=$1 sanitizers=$2 dir="$BUILD_DIR/sanitize-$1" started=$SECONDS
  if [ ! -f "$dir/build.ninja" ]; then
    log "configuring $dir (-fsanitize=$sanitizers)"
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
      -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DTIDEGATE_SANITIZE="$sanitizers" -DTIDEGATE_WARNINGS_AS_ERRORS=ON \
      -DTIDEGATE_BUILD_BENCH=OFF -DTIDEGATE_WITH_CUDA=OFF -DTIDEGATE_WITH_NCCL=OFF \
      -DTIDEGATE_WITH_PYTORCH=OFF >/dev/null || return
  fi
  log "building the $name tests"
  local targets=() dirs_var="SANITIZE_${name^^}_TARGET_DIRS[@]"
  for d in "${!dirs_var}"; do targets+=("$d/all"); done
  cmake --build "$dir" -j "$JOBS" --target "${targets[@]}" ||
    { record_stage "$name sanitizer build" 1; return 1; }
  log "$name build: $((SECONDS - started)) s; running its tests"
  local tests exclude status=0
  if [ "$name" = asan ]; then tests=$SANITIZE_ASAN_TESTS exclude=$SANITIZE_ASAN_EXCLUDE; else
    tests=$SANITIZE_TSAN_TESTS exclude=$SANITIZE_TSAN_EXCLUDE; fi
  local common=(--test-dir "$dir" --output-on-failure --timeout 600 -j "$JOBS")
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  local part=0
  if [ "$name" = asan ]; then
    ASAN_OPTIONS="detect_leaks=1" LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp" \
      ctest "${common[@]}" -R "$tests" -E "$exclude|mpi" || part=$?
    record_stage "$name sanitizer tests" "$part" "$dir"
    status=$((status | part)) part=0
    # ctest takes one -R: the mpirun jobs are named one by one (regex characters escaped).
    local mpi_jobs
    mpi_jobs=$(ctest_names "$dir" -R "$tests" -E "$exclude" | grep mpi | as_name_regex || true)
    if [ -n "$mpi_jobs" ]; then
      ASAN_OPTIONS="detect_leaks=0" ctest "${common[@]}" -R "$mpi_jobs" || part=$?
      record_stage "$name sanitizer mpirun jobs" "$part" "$dir"
      status=$((status | part))
    fi
  else
    UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no \
      ctest "${common[@]}" -R "$tests" -E "$exclude" || status=$?
    record_stage "$name sanitizer tests" "$status" "$dir"
  fi
  log "$name stage: $((SECONDS - started)) s, status $status"
  return "$status"
}

# Installs the PyTorch backend into $VENV (compiled against its torch, linked to the libtidegate
# just built) and runs its tests. Each step returns on failure itself: callers may run it where
# `set -e` does not apply.
python_tests() {
  setup_python || return
  log "installing the PyTorch backend (integrations/pytorch) into $VENV"
  # ccache (used by torch's extension builder when installed) hits across clones of the tree.
  CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" MAX_JOBS="$JOBS" TIDEGATE_BUILD_DIR="$BUILD_DIR" \
    "$VENV/bin/pip" install -q --no-build-isolation "$ROOT/integrations/pytorch" || return
  log "running the PyTorch backend's tests (tests/python)"
  # -rfEs: failures, errors and skips summarised at the end; the FAILED/ERROR lines are kept
  # for the closing summary of `./run.sh test`.
  local out="$BUILD_DIR/pytest-last.log" code=0
  "$VENV/bin/python" -m pytest -q -rfEs "$ROOT/tests/python" 2>&1 | tee "$out" || code=$?
  PYTEST_FAILED=$(grep -E '^(FAILED|ERROR) ' "$out" | cut -d' ' -f2 | paste -sd' ' || true)
  return "$code"
}

cmd_pytest() {
  cmd_build
  python_tests
}

cmd_bench() {
  cmd_build
  "$ROOT/bench/run_benchmarks.sh" "$BUILD_DIR" "$@"
}

cmd_soak() {
  local minutes=10
  while [ $# -gt 0 ]; do
    case "$1" in
      --minutes) minutes=$2; shift 2 ;;
      *) echo "run.sh soak: unknown option $1" >&2; exit 2 ;;
    esac
  done
  cmd_build
  local log_file="$BUILD_DIR/soak-$(date +%Y%m%d-%H%M%S).log"
  log "soak: 4 ranks for $minutes minutes; log in $log_file"
  "$BUILD_DIR/src/tools/tidegate_run/tidegate-run" -n 4 --timeout-ms 120000 -- \
    "$BUILD_DIR/tests/soak/tidegate_soak" --minutes "$minutes" --sample-s 30 >"$log_file" 2>&1 || true
  python3 "$ROOT/bench/soak/summarise_soak.py" "$log_file" --warmup-s 60
}

sub="${1:-}"
[ $# -gt 0 ] && shift
case "$sub" in
  setup) cmd_setup "$@" ;;
  build) cmd_build "$@" ;;
  demo) cmd_demo "$@" ;;
  test) cmd_test "$@" ;;
  pytest) cmd_pytest ;;
  bench) cmd_bench "$@" ;;
  soak) cmd_soak "$@" ;;
  sanitize) cmd_sanitize "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d'
    exit 2
    ;;
esac
