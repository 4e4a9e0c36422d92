#!/usr/bin/env bash
# Runs the CUDA kernel tests, the NCCL transport tests (one rank on one GPU; when NCCL is
# installed) and the GPU encode benchmark on a machine with a GPU (the device machine, when one
# is lent): configures and builds only the CUDA targets in a fresh build directory, runs
# cuda_codec_tests (GPU payloads vs CPU payloads, byte for byte), transport_nccl_tests and
# tidegate-cuda-bench, writes logs to $OUT when it is set (else to the build directory), and
# prints a short table last: GB/s per codec and the fraction of the GPU's memory bandwidth.
#
# Usage: bench/cuda/run_on_device.sh [build-dir]     (default: build-device-cuda)
# Environment: JOBS (parallel compile jobs, default nproc), BENCH_ARGS (default "--mib 256 --runs 50").
set -u -o pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-device-cuda}
logs=${OUT:-$build}
jobs=${JOBS:-$(nproc)}
mkdir -p "$logs"
export PATH="/usr/local/cuda/bin:$PATH"

generator="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && generator=Ninja
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$logs/gpu.txt"

echo "== configure ($generator) =="
# Only what the GPU run needs: no MPI/UCX/PyTorch, CUDA required, NCCL when it is installed.
if ! cmake -S . -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DTIDEGATE_WITH_CUDA=ON \
     -DTIDEGATE_WITH_MPI=OFF -DTIDEGATE_WITH_UCX=OFF -DTIDEGATE_WITH_NCCL=AUTO -DTIDEGATE_WITH_PYTORCH=OFF \
     >"$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log"; echo "configure failed (log: $logs/configure.log)"; exit 1
fi
echo "== build =="
if ! cmake --build "$build" -j "$jobs" --target cuda_codec_tests tidegate-cuda-bench >"$logs/build.log" 2>&1; then
  tail -40 "$logs/build.log"; echo "build failed (log: $logs/build.log)"; exit 1
fi

echo "== tests =="
"$build/tests/cuda/cuda_codec_tests" --gtest_brief=1 >"$logs/tests.log" 2>&1
tests_rc=$?
grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests ran|Failure|differ|refused" "$logs/tests.log" | head -60

echo "== nccl transport tests =="
# Built only when configure found NCCL; its absence is reported, not a failure.
nccl_rc=0
if cmake --build "$build" -j "$jobs" --target transport_nccl_tests >"$logs/build-nccl.log" 2>&1; then
  timeout 180 "$build/tests/transport_nccl/transport_nccl_tests" --gtest_brief=1 >"$logs/tests-nccl.log" 2>&1
  nccl_rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests ran|Failure|Skipped|error" "$logs/tests-nccl.log" | head -40
else
  echo "transport_nccl_tests not built (no NCCL? log: $logs/build-nccl.log)"; tail -5 "$logs/build-nccl.log"
fi

echo "== benchmark =="
# shellcheck disable=SC2086
"$build/bench/cuda/tidegate-cuda-bench" ${BENCH_ARGS:---mib 256 --runs 50} >"$logs/bench.txt" 2>&1
bench_rc=$?

echo
echo "== summary: tests rc=$tests_rc, nccl tests rc=$nccl_rc, bench rc=$bench_rc (logs in $logs) =="
cat "$logs/bench.txt"
[ "$tests_rc" -eq 0 ] && [ "$nccl_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
