#!/usr/bin/env bash
# Abort and rebuild, end to end (issue 13): the digits trainer is run twice with checkpoints,
# once undisturbed and once with one rank SIGKILLed mid-step and started again by tidegate-run
# --restarts. Passes when both jobs succeed, the second really lost a rank and resumed from a
# checkpoint, and both end with the same parameter hash (bitwise-identical parameters on every
# rank, and the same as if nothing had failed: model, momentum and error-feedback state were
# all restored).
#   check_restart.sh TIDEGATE_RUN PROGRAM DATA RANKS RANK:EPOCH:STEP [TRAINER ARGS...]
set -u
run=$1 program=$2 data=$3 ranks=$4 fail_at=$5
shift 5
work=$(mktemp -d /tmp/tidegate-restart.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/plain" "$work/failed"

"$run" -n "$ranks" -- "$program" "$data" --checkpoint "$work/plain" "$@" >"$work/plain.log" 2>&1
plain_code=$?
"$run" -n "$ranks" --restarts 1 -- "$program" "$data" --checkpoint "$work/failed" \
  --fail-at "$fail_at" "$@" >"$work/failed.log" 2>&1
failed_code=$?

hash_of() { sed -n 's/.*parameter hash \([0-9a-f]*\) on every rank.*/\1/p' "$1" | tail -n 1; }
plain_hash=$(hash_of "$work/plain.log") failed_hash=$(hash_of "$work/failed.log")
victim=${fail_at%%:*}
echo "undisturbed job: exit $plain_code, hash ${plain_hash:-none}"
echo "job that lost rank $victim: exit $failed_code, hash ${failed_hash:-none}"
grep -E 'tidegate-run: rank|rebuilding|resuming' "$work/failed.log"

fail() { echo "FAIL: $1"; echo "--- undisturbed job:"; tail -n 20 "$work/plain.log"
         echo "--- job that lost a rank:"; tail -n 60 "$work/failed.log"; exit 1; }
[ "$plain_code" -eq 0 ] || fail "the undisturbed job failed"
[ "$failed_code" -eq 0 ] || fail "the job that lost a rank did not recover"
grep -q "tidegate-run: rank $victim was killed by signal 9" "$work/failed.log" ||
  fail "rank $victim was not killed (is --fail-at inside the run?)"
survivors=$(grep -c 'rebuilding the communicator' "$work/failed.log")
[ "$survivors" -eq $((ranks - 1)) ] ||
  fail "$survivors ranks rebuilt their communicator, want every survivor ($((ranks - 1)))"
grep -q 'resuming after epoch' "$work/failed.log" || fail "the job did not resume from a checkpoint"
[ -n "$plain_hash" ] && [ "$plain_hash" = "$failed_hash" ] ||
  fail "the parameters differ from the undisturbed job's ($failed_hash vs $plain_hash)"
echo PASS
