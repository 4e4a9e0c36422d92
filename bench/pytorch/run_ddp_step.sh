#!/usr/bin/env bash
# run_ddp_step.sh: DDP training-step time on Gloo, tidegate, tidegate with its compressed hook,
# and WaitFreeDataParallel, on the emulated cluster (issue 12), in one job:
#
#   bench/pytorch/run_ddp_step.sh [-n 4] [--rate 1gbit] [--json FILE] [-- ddp_step_bench.py args]
#
# Brings the cluster up (bench/cluster/emulate.sh), then runs bench/pytorch/ddp_step_bench.py
# with one rank per network namespace under mpirun (bench/cluster/mpirun_ns.sh), in the
# project's virtual environment (./run.sh setup makes it). Gloo and tidegate both use the
# namespace's eth0; the ranks meet at rank 0's address.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ranks=4
rate=1gbit
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
    --) shift; break ;;
    *) echo "run_ddp_step.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
python="$root/.venv/bin/python"
[[ -x "$python" ]] || { echo "run_ddp_step.sh: no $python; run ./run.sh setup first" >&2; exit 2; }

if [[ -z "${TGC_N:-}" ]]; then
  forward=(-n "$ranks" --rate "$rate")
  [[ -n "$json" ]] && forward+=(--json "$json")
  exec "$root/bench/cluster/emulate.sh" -n "$ranks" --rate "$rate" -- "${BASH_SOURCE[0]}" "${forward[@]}" -- "$@"
fi

export TIDEGATE_TCP_IFACE="$TGC_RANK_IFACE" GLOO_SOCKET_IFNAME="$TGC_RANK_IFACE"
export MASTER_ADDR="${TGC_RANK_ADDRS%%,*}" MASTER_PORT=29571
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
extra=()
[[ -n "$json" ]] && extra=(--json "$json")
echo "# emulated cluster: ${TGC_N} ranks, link rate ${TGC_RATE} per rank and direction"
exec "$root/bench/cluster/mpirun_ns.sh" -- "$python" "$here/ddp_step_bench.py" "${extra[@]}" "$@"
