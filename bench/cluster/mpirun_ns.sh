#!/usr/bin/env bash
# mpirun_ns.sh: mpirun across the emulated cluster's namespaces. Run inside emulate.sh:
#   bench/cluster/emulate.sh -n 4 --rate 1gbit -- bench/cluster/mpirun_ns.sh [mpirun options] -- program args
# Builds one MPMD app context per rank ("-np 1 ip netns exec <ns_i> program args"), so that
# rank i runs in namespace i, and adds TGC_MPIRUN_ARGS (TCP BTL only, restricted to the subnet;
# without that Open MPI would use shared memory between "local" ranks and bypass the links).
set -euo pipefail
: "${TGC_NS_PREFIX:?run me inside bench/cluster/emulate.sh}"
mpirun_options=()
while [[ $# -gt 0 && "$1" != "--" ]]; do mpirun_options+=("$1"); shift; done
[[ $# -gt 1 ]] || { echo "usage: mpirun_ns.sh [mpirun options] -- program args" >&2; exit 2; }
shift
root_flags=()
[[ $EUID -eq 0 ]] && root_flags=(--allow-run-as-root)

contexts=()
for (( i = 0; i < TGC_N; i++ )); do
  (( i > 0 )) && contexts+=(":")
  contexts+=(-np 1 ip netns exec "${TGC_NS_PREFIX}${i}" "$@")
done
# shellcheck disable=SC2086  # TGC_MPIRUN_ARGS is a list of words by design
exec mpirun "${root_flags[@]}" $TGC_MPIRUN_ARGS "${mpirun_options[@]}" "${contexts[@]}"
