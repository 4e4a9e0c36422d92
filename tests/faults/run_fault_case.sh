#!/usr/bin/env bash
# Runs one fault case and judges it (see fault_checks.h for what each rank checks):
#   run_fault_case.sh env TIDEGATE_RUN PROGRAM NP TRANSPORT TIMEOUT_MS EXPECT_OK [ARGS...]
#   run_fault_case.sh mpi MPIEXEC      PROGRAM NP TRANSPORT TIMEOUT_MS EXPECT_OK [ARGS...]
# (kind mpi-recovery: mpirun --enable-recovery, which lets the survivors of a dead rank live on)
# Passes when exactly EXPECT_OK ranks print an OK verdict (or, for EXPECT_OK given as MIN-MAX,
# between MIN and MAX do), none prints BAD, the launcher exits non-zero (a rank was lost or
# failed) and the whole job ends within TIMEOUT_MS + 25 s (no rank hangs). Open MPI 4.1's
# mpirun --enable-recovery exits 0 even when a rank was killed, so its exit code is not judged.
# ARGS go to the program (--scenario, --phase, --signal, ...).
set -u
kind=$1 launcher=$2 program=$3 np=$4 transport=$5 timeout_ms=$6 expect_ok=$7
shift 7
work=$(mktemp -d /tmp/tidegate-fault.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TIDEGATE_TIMEOUT_MS=$timeout_ms TIDEGATE_TRANSPORT=$transport
# A long probe budget keeps the probe running while a probe-phase fault lands.
export TIDEGATE_PROBE_BUDGET_MS=${TIDEGATE_PROBE_BUDGET_MS:-4000}
limit=$(( timeout_ms / 1000 + 25 ))
args=("$@" --stamp "$work/stamp" --timeout-ms "$timeout_ms")
start=$(date +%s%N)
case "$kind" in
  env)
    timeout -k 5 "$limit" "$launcher" -n "$np" --grace-ms 30000 -- "$program" "${args[@]}" \
      >"$work/out" 2>&1
    ;;
  mpi|mpi-recovery)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    recovery=()
    [ "$kind" = mpi-recovery ] && recovery=(--enable-recovery)
    timeout -k 5 "$limit" "$launcher" -np "$np" --oversubscribe --bind-to none "${recovery[@]}" \
      -x TIDEGATE_TIMEOUT_MS -x TIDEGATE_TRANSPORT \
      -x TIDEGATE_PROBE_BUDGET_MS "$program" "${args[@]}" >"$work/out" 2>&1
    ;;
  *) echo "run_fault_case.sh: unknown launcher kind '$kind'"; exit 2 ;;
esac
code=$?
seconds=$(( ($(date +%s%N) - start) / 1000000 ))
ok=$(grep -c 'fault-check: rank [0-9]*: OK' "$work/out")
bad=$(grep -c 'fault-check: rank [0-9]*: BAD' "$work/out")
grep 'fault-check:' "$work/out"
echo "launcher exit code $code after $seconds ms; $ok OK, $bad BAD (want $expect_ok OK)"
if [ "$code" -eq 124 ] || [ "$code" -eq 137 -a "$seconds" -ge $(( limit * 1000 )) ]; then
  echo "FAIL: the job did not end within ${limit} s"; tail -n 40 "$work/out"; exit 1
fi
min_ok=${expect_ok%-*} max_ok=${expect_ok#*-}
launcher_failed=1
[ "$code" -eq 0 ] && [ "$kind" != mpi-recovery ] && launcher_failed=0
if [ "$bad" -ne 0 ] || [ "$ok" -lt "$min_ok" ] || [ "$ok" -gt "$max_ok" ] ||
   [ "$launcher_failed" -eq 0 ]; then
  echo "FAIL"; tail -n 60 "$work/out"; exit 1
fi
echo PASS
