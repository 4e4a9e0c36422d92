#!/usr/bin/env bash
# CTest for bench/cluster/emulate.sh: the namespaces, addresses and shaping exist while the
# command runs, the command's exit status comes back, and nothing is left afterwards - also
# when the command fails or emulate.sh itself is killed. Skips (77) without root/netns.
set -euo pipefail
emulate="$1/bench/cluster/emulate.sh"
prefix=tgtest

if [[ $EUID -ne 0 ]] || ! ip netns add "${prefix}-probe" 2>/dev/null; then
  echo "SKIP: needs root and ip netns"; exit 77
fi
ip netns del "${prefix}-probe"
cleanup() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^${prefix}-"); do ip netns del "$ns"; done
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
leftovers() { ip netns list | awk '{print $1}' | grep -c "^${prefix}-" || true; }

# 1. Inside: three ranks with their addresses, tbf on both ends, the environment described.
# shellcheck disable=SC2016  # the script is expanded by the inner bash, inside the cluster
out=$("$emulate" --prefix "$prefix" -n 3 --rate 1gbit --subnet 10.78.0.0/24 -- bash -c '
  echo "N=$TGC_N HUB=$TGC_HUB_ADDR ADDRS=$TGC_RANK_ADDRS NS=$TGC_NS_PREFIX"
  ip -n tgtest-r2 -br addr show eth0 | awk "{print \"r2\", \$3}"
  tc -n tgtest-r2 qdisc show dev eth0 | grep -c tbf | sed "s/^/rank-side-tbf /"
  tc qdisc show dev vr2 | grep -c tbf | sed "s/^/hub-side-tbf /"
  ip -br addr show br0 | awk "{print \"hub\", \$3}"')
echo "$out"
grep -q "N=3 HUB=10.78.0.254 ADDRS=10.78.0.1,10.78.0.2,10.78.0.3 NS=tgtest-r" <<< "$out" || fail "environment"
grep -q "r2 10.78.0.3/24" <<< "$out" || fail "rank address"
grep -q "rank-side-tbf 1" <<< "$out" || fail "tbf on the rank side"
grep -q "hub-side-tbf 1" <<< "$out" || fail "tbf on the hub side"
grep -q "hub 10.78.0.254/24" <<< "$out" || fail "hub address"
[[ $(leftovers) -eq 0 ]] || fail "namespaces left after a clean run"

# 2. A failing command: its status comes back, the namespaces go.
set +e
"$emulate" --prefix "$prefix" -n 2 -- sh -c 'exit 7'
status=$?
set -e
[[ $status -eq 7 ]] || fail "exit status $status, expected 7"
[[ $(leftovers) -eq 0 ]] || fail "namespaces left after a failing command"

# 3. emulate.sh killed outright: the next run removes what it left, including its processes.
# A duration no other process on this shared machine is sleeping for, so that the check below
# sees only this run's command.
marker="300.$$"
"$emulate" --prefix "$prefix" -n 2 -- sleep "$marker" &
victim=$!
for _ in $(seq 100); do [[ $(leftovers) -ge 3 ]] && break; sleep 0.05; done
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
[[ $(leftovers) -ge 3 ]] || fail "setup of the killed run not seen"
"$emulate" --prefix "$prefix" -n 2 -- true
[[ $(leftovers) -eq 0 ]] || fail "stale namespaces not cleaned"
if pgrep -f "^sleep ${marker}$" > /dev/null; then fail "the killed run's command survived"; fi
echo PASS
