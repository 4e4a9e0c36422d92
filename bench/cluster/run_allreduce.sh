#!/usr/bin/env bash
# run_allreduce.sh: tidegate's allreduce against MPI_Allreduce on the emulated cluster, in one
# command (it brings the cluster up itself through emulate.sh):
#
#   bench/cluster/run_allreduce.sh -n 4 --rate 1gbit -- -b 64M -e 64M -n 5
#
# Runs tidegate-bench under mpirun with one rank per namespace and --baseline mpi; the
# arguments after -- go to tidegate-bench and override the defaults (later flags win).
# --launcher tidegate-run runs the ranks under tidegate-run instead (no MPI baseline).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ranks=4
rate=1gbit
build="${here}/../../build"
launcher=mpirun
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --launcher) launcher="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
    --) shift; break ;;
    *) echo "run_allreduce.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
bench="${build}/bench/tidegate_bench/tidegate-bench"
run="${build}/src/tools/tidegate_run/tidegate-run"
[[ -x "$bench" ]] || { echo "run_allreduce.sh: no $bench; build first or pass --build DIR" >&2; exit 2; }
[[ "$launcher" == mpirun || "$launcher" == tidegate-run ]] ||
  { echo "run_allreduce.sh: --launcher must be mpirun or tidegate-run" >&2; exit 2; }

if [[ -z "${TGC_N:-}" ]]; then
  # Not inside a cluster yet: bring one up and come back in it.
  forward=(-n "$ranks" --rate "$rate" --build "$build" --launcher "$launcher")
  [[ -n "$json" ]] && forward+=(--json "$json")
  exec "${here}/emulate.sh" -n "$ranks" --rate "$rate" -- "${BASH_SOURCE[0]}" "${forward[@]}" -- "${bench_args[@]}"
fi

# Every rank's interface in its namespace is eth0: the TCP transport binds and advertises it.
export TIDEGATE_TCP_IFACE="$TGC_RANK_IFACE"
defaults=(-C allreduce -d float -o sum -b 1K -e 64M -f 8 -n 5 -w 2 -c 1)
[[ -n "$json" ]] && defaults+=(--json "$json")
echo "# emulated cluster: ${TGC_N} ranks, link rate ${TGC_RATE} per rank and direction, launcher ${launcher}"
if [[ "$launcher" == mpirun ]]; then
  exec "${here}/mpirun_ns.sh" -- "$bench" "${defaults[@]}" --baseline mpi "${bench_args[@]}"
else
  exec "$run" -n "$TGC_N" --host "$TGC_HUB_ADDR" --wrap "ip netns exec ${TGC_NS_PREFIX}{rank}" -- \
    "$bench" "${defaults[@]}" "${bench_args[@]}"
fi
