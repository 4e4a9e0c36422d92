#!/usr/bin/env bash
# run_small_messages.sh: small-message latency against MPI_Allreduce on the emulated cluster
# (issue 15), repeated so that the noise of a shared machine shows and the medians hold:
#
#   bench/cluster/run_small_messages.sh [-r REPEATS] [--build DIR] [--out DIR] [--rates LIST] [--ab]
#                                       [--ab-prediction]
#
# Each repeat runs, for every rate (1gbit,10gbit,none by default, alternating so that drift hits
# them alike), bench/cluster/run_allreduce.sh with 4 ranks: float32 sum, 4 B to 64 KiB (factor
# 4), 50 timed iterations after 10 warm-up, tidegate's own plan, the forced mpi/native choice and
# MPI_Allreduce called directly, all on the same buffers in the same run. --ab adds a run with
# TIDEGATE_CALLER_RUNS=0 (the progress thread runs every op) beside each default one;
# --ab-prediction one with TIDEGATE_NATIVE_PREDICTION=off (every native op has its identity
# round). The JSON
# rows go to --out (default: a new directory under /tmp); summarise_small_messages.py prints
# the medians over the repeats as a table.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repeats=5
build="${here}/../../build"
out=""
rates="1gbit,10gbit,none"
ab=0
ab_prediction=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -r) repeats="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --ab) ab=1; shift ;;
    --ab-prediction) ab_prediction=1; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run_small_messages.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || out=$(mktemp -d /tmp/small-messages.XXXXXX)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
variants=(default)
(( ab )) && variants+=(handover)
(( ab_prediction )) && variants+=(noprediction)
IFS=, read -r -a rate_list <<< "$rates"
for (( rep = 1; rep <= repeats; ++rep )); do
  for rate in "${rate_list[@]}"; do
    for variant in "${variants[@]}"; do
      json="$out/small_${rate}_${variant}_${rep}.json"
      rm -f "$json"
      caller_runs=1 prediction=on
      [[ "$variant" == handover ]] && caller_runs=0
      [[ "$variant" == noprediction ]] && prediction=off
      echo "# repeat $rep/$repeats, rate $rate, $variant" >&2
      TIDEGATE_CALLER_RUNS=$caller_runs TIDEGATE_NATIVE_PREDICTION=$prediction \
        "${here}/run_allreduce.sh" -n 4 --rate "$rate" \
        --build "$build" --json "$json" -- -b 4 -e 64K -f 4 -n 50 -w 10 -I 0 \
        --choices mpi/native > "$out/small_${rate}_${variant}_${rep}.txt" 2>&1 ||
        { echo "run_small_messages.sh: run failed; see $out/small_${rate}_${variant}_${rep}.txt" >&2; exit 1; }
    done
  done
done
python3 "${here}/summarise_small_messages.py" "$out"
echo "# rows: $out" >&2
