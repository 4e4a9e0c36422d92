#!/usr/bin/env bash
# How soon survivors learn that a rank was lost (issue 13, under a 5 s timeout: "SIGKILL ->
# every survivor errors within 1 s naming the rank, on every transport; SIGSTOP -> within 6 s").
# Runs the fault matrix's cases that follow creation (probe, mid-collective, between
# collectives; 4 ranks under tidegate-run, the last one killed or stopped,
# TIDEGATE_TIMEOUT_MS=5000) REPEATS times per signal and transport, and gathers every
# survivor's "N ms after the fault" from the fault checker (tests/faults/fault_checks.cc, which
# also demands that the message names the lost rank). Prints a table of median and maximum per
# case and writes every figure to OUT (JSON).
#
#   bench/faults/fault_detection.sh BUILD_DIR [REPEATS=5] [OUT] [SIGNALS="kill stop"]
#                                   [TRANSPORTS="tcp ucx mpi"]
#
# OUT defaults to bench/results/faults/fault_detection.json. The mpi transport's SIGKILL cases
# run under mpirun --enable-recovery (plain mpirun ends every rank as soon as one dies), its
# SIGSTOP cases under plain mpirun; both mid-collective and between collectives only:
# creation's MPI calls have no deadline, so the matrix leaves creation and probe out under
# mpirun.
set -euo pipefail
build=${1:?usage: fault_detection.sh BUILD_DIR [REPEATS] [OUT] [SIGNALS]}
repeats=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/faults/fault_detection.json}
signals=${4:-kill stop}
transports=${5:-tcp ucx mpi}
run_case=$root/tests/faults/run_fault_case.sh
launcher=$build/src/tools/tidegate_run/tidegate-run
checker=$build/tests/faults/fault_check
mpi_checker=$build/tests/faults/fault_check_mpi
[ -x "$launcher" ] && [ -x "$checker" ] || { echo "build $build first (tidegate-run, fault_check)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

for signal in $signals; do
  for transport in $transports; do
    phases="probe mid between"
    job=(env "$launcher" "$checker")
    if [ "$transport" = mpi ]; then
      phases="mid between"
      # A stopped rank never ends, so --enable-recovery would wait for it: plain mpirun there.
      kind=mpi
      [ "$signal" = kill ] && kind=mpi-recovery
      job=("$kind" "$(command -v mpirun)" "$mpi_checker")
    fi
    for phase in $phases; do
      for ((i = 0; i < repeats; i++)); do
        log=$("$run_case" "${job[@]}" 4 "$transport" 5000 3 \
          --scenario fault --phase "$phase" --signal "$signal" 2>&1) || {
          echo "$signal $transport $phase run $i failed:" >&2; echo "$log" | tail -n 20 >&2; exit 1; }
        # One line per survivor: "rank R: OK: N ms after the fault (bound ...), names rank 3: ..."
        echo "$log" | sed -n "s/.*fault-check: rank \([0-9]*\): OK: \([0-9]*\) ms after the fault.*/$signal $transport $phase $i \1 \2/p" >>"$raw"
      done
    done
  done
done

python3 "$root/bench/faults/summarise_fault_detection.py" "$raw" "$out" "$repeats"
