#!/usr/bin/env bash
# emulate.sh: an emulated cluster on one machine. N ranks each get their own network namespace,
# joined by veth pairs to a bridge that lives in a separate "hub" namespace, optionally shaped
# to a link rate with tc tbf; a command then runs in the hub namespace, and everything is torn
# down when it ends - also after a failure or a signal.
#
#   bench/cluster/emulate.sh -n 4 --rate 1gbit -- bench/cluster/run_allreduce.sh
#
# Nothing here touches the root namespace's network: links are created from inside the hub
# namespace with their peer placed directly in the rank namespace, and all addresses come
# from --subnet inside namespaces this script created. Must run as root (ip netns).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: emulate.sh -n N [--rate 1gbit|10gbit|none] [--subnet 10.77.0.0/24] [--prefix tgc]
                  [--timeout SECONDS] [--clean-stale] -- command [args...]

Brings up N rank namespaces (<prefix>-r0 .. <prefix>-r<N-1>, interface eth0, address
subnet+1+i) joined to a bridge in <prefix>-hub (address: last usable host of the subnet),
shapes both directions of every rank's link to --rate, runs the command in the hub namespace
and tears everything down. The command sees:
  TGC_N            number of ranks
  TGC_NS_PREFIX    rank i runs in namespace "${TGC_NS_PREFIX}i"
  TGC_HUB_NS       the hub namespace (the command's own)
  TGC_HUB_ADDR     the bridge's address (bind launchers and stores here)
  TGC_RANK_ADDRS   comma-separated rank addresses, rank 0 first
  TGC_RANK_IFACE   the ranks' interface name (eth0)
  TGC_SUBNET       the subnet, TGC_RATE the rate
  TGC_MPIRUN_ARGS  mpirun options that make Open MPI work across the namespaces (TCP only,
                   restricted to the subnet, PMIx reachable from the ranks); combine them with
                   an MPMD context per rank, or use bench/cluster/mpirun_ns.sh which does both.
The exit status is the command's (124 when --timeout stopped it).
USAGE
}

ranks=""
rate="none"
subnet="10.77.0.0/24"
prefix="tgc"
timeout_s=3600
clean_stale=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --subnet) subnet="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --clean-stale) clean_stale=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "emulate.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
command=("$@")
die() { echo "emulate.sh: $*" >&2; exit 2; }
[[ "$ranks" =~ ^[0-9]+$ && "$ranks" -ge 1 ]] || die "-n N (number of ranks, >= 1) is required"
[[ ${#command[@]} -gt 0 ]] || die "no command given (emulate.sh -n N -- command)"
[[ "$rate" =~ ^(none|[0-9]+(k|m|g)?bit)$ ]] || die "--rate must be none or like 1gbit, 10gbit, 500mbit"
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix must be 1-8 lowercase letters/digits"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
[[ $EUID -eq 0 ]] || die "must run as root (network namespaces)"

# shellcheck source=cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

parse_subnet "$subnet" "$ranks"   # sets SUBNET_BITS, HUB_ADDR, RANK_ADDRS[]
hub_ns="${prefix}-hub"
ns_prefix="${prefix}-r"
owner_file="/run/tidegate-cluster/${prefix}.owner"

claim_prefix "$prefix" "$owner_file" "$clean_stale"
# From here on, whatever happens, the namespaces go away.
trap 'status=$?; trap - EXIT INT TERM HUP; teardown "$prefix" "$owner_file"; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

build_cluster "$prefix" "$ranks" "$rate"

mpirun_args="--mca btl self,tcp --mca pml ob1 --mca btl_tcp_if_include ${subnet}"
mpirun_args+=" --mca oob_tcp_if_include ${subnet} --oversubscribe --bind-to none"
# shellcheck disable=SC2153  # RANK_ADDRS is set by parse_subnet
rank_addrs=$(IFS=,; echo "${RANK_ADDRS[*]}")
echo "emulate.sh: ${ranks} ranks in ${ns_prefix}0..${ns_prefix}$((ranks - 1)) (${rank_addrs}), hub ${HUB_ADDR} in ${hub_ns}, rate ${rate}" >&2

# The command runs in the background so that a signal to this script is handled (teardown)
# at once instead of after the command finishes.
set +e
ip netns exec "$hub_ns" env \
  TGC_N="$ranks" TGC_NS_PREFIX="$ns_prefix" TGC_HUB_NS="$hub_ns" TGC_HUB_ADDR="$HUB_ADDR" \
  TGC_RANK_ADDRS="$rank_addrs" TGC_RANK_IFACE=eth0 TGC_SUBNET="$subnet" TGC_RATE="$rate" \
  TGC_MPIRUN_ARGS="$mpirun_args" \
  PMIX_MCA_ptl_tcp_if_include="$subnet" PMIX_MCA_ptl_tcp_remote_connections=1 \
  OMPI_MCA_btl_tcp_if_include="$subnet" OMPI_MCA_oob_tcp_if_include="$subnet" \
  timeout --signal=TERM --kill-after=10 "$timeout_s" "${command[@]}" &
child=$!
wait "$child"
status=$?
set -e
[[ $status -eq 124 ]] && echo "emulate.sh: the command ran past --timeout ${timeout_s}s" >&2
exit "$status"
