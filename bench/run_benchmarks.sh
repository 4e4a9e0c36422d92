#!/usr/bin/env bash
# The benchmarks behind bench/RESULTS.md, in one go: `./run.sh bench` calls this with the build
# directory. Each block prints the command it runs, so every figure can be traced to it.
#   (a) 4 ranks on the emulated cluster at 1 Gbit/s per rank (needs root for namespaces)
#   (b) 4 ranks on unshaped loopback, Open MPI restricted to its TCP BTL
#   (c) codec encode/decode throughput against memcpy (single core)
set -euo pipefail
build="${1:?usage: run_benchmarks.sh BUILD_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/bench/tidegate_bench/tidegate-bench"

run() { printf '\n$ %s\n' "$*"; "$@"; }

echo "== (a) emulated cluster, 1 Gbit/s per rank, 64 MiB float32 sum, 4 ranks"
if [ "$(id -u)" -eq 0 ]; then
  run "$root/bench/cluster/run_allreduce.sh" -n 4 --rate 1gbit --build "$build" -- \
    -b 64M -e 64M -n 10 -w 2 -c 1 -I 0
else
  echo "skipped: network namespaces need root"
fi

echo "== (b) unshaped loopback, Open MPI on TCP, 64 MiB float32 sum, 4 ranks"
run mpirun -np 4 --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo \
  --mca pml ob1 "$bench" -b 64M -e 64M -n 10 -w 2 -c 1 -I 0 --baseline mpi

if [ -x "$build/bench/codec/tidegate-codec-bench" ]; then
  echo "== (c) codec throughput, single core, as a fraction of memcpy"
  run "$build/bench/codec/tidegate-codec-bench" --benchmark_filter='64Mi' --benchmark_min_time=0.5
fi
