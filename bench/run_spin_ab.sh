#!/usr/bin/env bash
# Small-message latency with and without the progress thread's polling (TIDEGATE_SPIN_US):
# alternates runs of tidegate-bench (4 ranks, loopback, Open MPI's TCP BTL as the baseline) with
# TIDEGATE_SPIN_US=0 and with the default, and prints per size the median over the runs of
# tidegate's time and of its ratio to MPI_Allreduce measured in the same run.
#   bench/run_spin_ab.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:?usage: bench/run_spin_ab.sh BUILD_DIR [REPEATS]}
repeats=${2:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((rep = 1; rep <= repeats; ++rep)); do
  for spin in 0 default; do
    env_args=()
    [[ $spin == 0 ]] && env_args=(-x TIDEGATE_SPIN_US=0)
    mpirun -np 4 --oversubscribe --bind-to none "${env_args[@]}" \
      --mca btl self,tcp --mca btl_tcp_if_include lo --mca pml ob1 \
      "$build/bench/tidegate_bench/tidegate-bench" -b 1K -e 1M -f 4 -n 300 -w 20 -c 1 --baseline mpi \
      | awk -v spin="$spin" '/^ +[0-9]+ / && $8 == 0 && $12 == 0 { print spin, $1, $5, $13 }' >> "$out/rows"
  done
done
python3 - "$out/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    spin, size, ours, mpi = line.split()
    rows.setdefault((int(size), spin), []).append((float(ours), float(mpi)))
print("size_B  spin  runs  median_us  median_mpi_us  median_ratio(tidegate/mpi)")
for (size, spin) in sorted(rows, key=lambda k: (k[0], k[1] != "0")):
    r = rows[(size, spin)]
    print(f"{size:>7} {spin:>7} {len(r):>4} {statistics.median(o for o, _ in r):>10.1f} "
          f"{statistics.median(m for _, m in r):>13.1f} {statistics.median(o / m for o, m in r):>10.2f}")
PY
