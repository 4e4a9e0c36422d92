#!/usr/bin/env bash
# run_plan_check.sh: the probe and the plan on the emulated cluster, in one command (it brings
# the cluster up itself through emulate.sh):
#
#   bench/cluster/run_plan_check.sh -n 4 --rate 1gbit --out /tmp/plan-1gbit
#
# Under mpirun, one rank per namespace (so the communicator gets tcp, mpi and ucx):
#   1. tidegate-info --json  (probe figures per transport and the plan)  -> OUT/info.json
#   2. tidegate-bench -C allreduce -b 4K -e 64M --transport auto --compare-choices 1, every
#      forced transport/algorithm timed beside auto on the same buffers  -> OUT/bench.json(l)
#   3. bench/cluster/summarise_plan_check.py: probe vs link rate, auto vs the fastest forced
#      choice per size, probe time                                       -> OUT/summary.md
# Arguments after -- go to tidegate-bench (e.g. -- -n 10 -w 3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ranks=4
rate=1gbit
build="${here}/../../build"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    --) shift; break ;;
    *) echo "run_plan_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
[[ -n "$out" ]] || { echo "run_plan_check.sh: --out DIR is required" >&2; exit 2; }
bench="${build}/bench/tidegate_bench/tidegate-bench"
info="${build}/src/tools/info/tidegate-info"
[[ -x "$bench" && -x "$info" ]] || { echo "run_plan_check.sh: build first or pass --build DIR" >&2; exit 2; }

if [[ -z "${TGC_N:-}" ]]; then
  mkdir -p "$out"
  "${here}/emulate.sh" -n "$ranks" --rate "$rate" -- "${BASH_SOURCE[0]}" -n "$ranks" --rate "$rate" \
    --build "$build" --out "$out" -- "${bench_args[@]}"
  exec python3 "${here}/summarise_plan_check.py" --rate "$rate" "$out"
fi

export TIDEGATE_TCP_IFACE="$TGC_RANK_IFACE"
# UCX inside the namespaces: TCP over the shaped interface only (no shared memory shortcut,
# which would bypass the links), like Open MPI's TCP BTL set-up of mpirun_ns.sh.
export UCX_TLS=tcp,self UCX_NET_DEVICES="$TGC_RANK_IFACE"
echo "# emulated cluster: ${TGC_N} ranks, link rate ${TGC_RATE} per rank and direction"
# Every TIDEGATE_* variable of the caller reaches the ranks (e.g. TIDEGATE_REPLAN_INTERVAL).
forward=(-x UCX_TLS -x UCX_NET_DEVICES)
for var in $(compgen -e | grep '^TIDEGATE_' || true); do forward+=(-x "$var"); done
"${here}/mpirun_ns.sh" "${forward[@]}" -- "$info" --json > "$out/info.json"
"${here}/mpirun_ns.sh" "${forward[@]}" -- "$bench" \
  -C allreduce -d float -o sum -b 4K -e 64M -f 4 -n 7 -w 2 -c 1 -I 0 \
  --transport auto --compare-choices 1 --json "$out/bench.jsonl" "${bench_args[@]}" | tee "$out/bench.txt"
