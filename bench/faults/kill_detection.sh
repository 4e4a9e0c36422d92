#!/usr/bin/env bash
# How soon survivors learn that a rank was killed (issue 13: "SIGKILL -> every survivor errors
# within 1 s naming the rank, on every transport"). Runs the fault matrix's SIGKILL cases that
# follow creation (probe, mid-collective, between collectives; 4 ranks under tidegate-run, the
# last one killed, TIDEGATE_TIMEOUT_MS=5000) REPEATS times per transport, and gathers every
# survivor's "N ms after the fault" from the fault checker (tests/faults/fault_checks.cc, which
# also demands that the message names the killed rank). Prints a table of median and maximum
# per case and writes every figure to OUT (JSON).
#
#   bench/faults/kill_detection.sh BUILD_DIR [REPEATS=5] [OUT=bench/results/faults/kill_detection.json]
#
# The mpi transport is not in it: under mpirun, Open MPI's runtime ends every rank as soon as
# one dies (the matrix's faults.mpi.* cases check that the job ends non-zero and nothing hangs).
set -euo pipefail
build=${1:?usage: kill_detection.sh BUILD_DIR [REPEATS] [OUT]}
repeats=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/faults/kill_detection.json}
run_case=$root/tests/faults/run_fault_case.sh
launcher=$build/src/tools/tidegate_run/tidegate-run
checker=$build/tests/faults/fault_check
[ -x "$launcher" ] && [ -x "$checker" ] || { echo "build $build first (tidegate-run, fault_check)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

for transport in tcp ucx; do
  for phase in probe mid between; do
    for ((i = 0; i < repeats; i++)); do
      log=$("$run_case" env "$launcher" "$checker" 4 "$transport" 5000 3 \
        --scenario fault --phase "$phase" --signal kill 2>&1) || {
        echo "$transport $phase run $i failed:" >&2; echo "$log" | tail -n 20 >&2; exit 1; }
      # One line per survivor: "rank R: OK: N ms after the fault (bound ...), names rank 3: ..."
      echo "$log" | sed -n "s/.*fault-check: rank \([0-9]*\): OK: \([0-9]*\) ms after the fault.*/$transport $phase $i \1 \2/p" >>"$raw"
    done
  done
done

python3 - "$raw" "$out" "$repeats" <<'EOF'
import json, statistics, sys
raw, out, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [line.split() for line in open(raw) if line.strip()]
cases = {}
for transport, phase, run, rank, ms in rows:
    cases.setdefault((transport, phase), []).append({"run": int(run), "rank": int(rank), "ms": int(ms)})
print(f"survivors' detection of a SIGKILLed rank, 4 ranks, {repeats} runs per case (ms after the kill)")
print("| transport | phase | survivors judged | median | max | within 1 s |")
print("|---|---|---|---|---|---|")
result = []
for (transport, phase), seen in cases.items():
    ms = [s["ms"] for s in seen]
    within = sum(1 for m in ms if m <= 1000)
    print(f"| {transport} | {phase} | {len(ms)} | {statistics.median(ms):.0f} | {max(ms)} | {within}/{len(ms)} |")
    result.append({"transport": transport, "phase": phase, "survivors": seen})
json.dump({"repeats": repeats, "ranks": 4, "timeout_ms": 5000, "cases": result}, open(out, "w"), indent=1)
EOF
echo "written: $out"
