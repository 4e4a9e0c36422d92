# cluster_lib.sh: the pieces of emulate.sh (sourced, not run): subnet arithmetic, claiming a
# namespace prefix, building the namespaces and links, shaping, and teardown.
# shellcheck shell=bash

ip_to_int() {
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 ))
}

int_to_ip() {
  local n=$1
  echo "$(( (n >> 24) & 255 )).$(( (n >> 16) & 255 )).$(( (n >> 8) & 255 )).$(( n & 255 ))"
}

# parse_subnet A.B.C.D/LEN N: sets SUBNET_BITS, HUB_ADDR (the last usable host) and
# RANK_ADDRS (hosts 1..N), checking that they fit.
parse_subnet() {
  local subnet=$1 n=$2
  [[ "$subnet" =~ ^([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)/([0-9]+)$ ]] ||
    die "--subnet '$subnet' is not A.B.C.D/LEN"
  local base bits
  base=$(ip_to_int "${BASH_REMATCH[1]}")
  bits=${BASH_REMATCH[2]}
  (( bits >= 8 && bits <= 29 )) || die "--subnet prefix length must be 8..29"
  local size=$(( 1 << (32 - bits) ))
  base=$(( base & ~(size - 1) & 0xffffffff ))
  (( n + 2 <= size - 2 )) || die "--subnet $subnet has room for $(( size - 4 )) ranks, not $n"
  SUBNET_BITS=$bits
  HUB_ADDR=$(int_to_ip $(( base + size - 2 )))
  RANK_ADDRS=()
  local i
  for (( i = 0; i < n; i++ )); do RANK_ADDRS+=("$(int_to_ip $(( base + 1 + i )))"); done
}

# Namespaces this prefix owns: <prefix>-hub and <prefix>-r<i>.
owned_namespaces() {
  local prefix=$1
  ip netns list | awk '{print $1}' | grep -E "^${prefix}-(hub|r[0-9]+)\$" || true
}

# claim_prefix PREFIX OWNER_FILE CLEAN_STALE: makes this process the owner of the prefix.
# The owner file (created atomically, holding our PID) keeps two concurrent runs from using the
# same namespaces; namespaces left by a run that died (its PID is gone) are cleaned up.
claim_prefix() {
  local prefix=$1 owner_file=$2 clean_stale=$3
  local reclaimed=0 owner stale=()
  mkdir -p "$(dirname "$owner_file")"
  if ! ( set -o noclobber; echo $$ > "$owner_file" ) 2>/dev/null; then
    owner=$(cat "$owner_file" 2>/dev/null || echo "")
    if [[ "$owner" =~ ^[0-9]+$ ]] && kill -0 "$owner" 2>/dev/null; then
      die "prefix '$prefix' is in use by emulate.sh PID $owner; use another --prefix"
    fi
    # Its owner died without tearing down: take over, and clean what it left below.
    rm -f "$owner_file"
    ( set -o noclobber; echo $$ > "$owner_file" ) 2>/dev/null ||
      die "another emulate.sh claimed prefix '$prefix' at the same moment; use another --prefix"
    reclaimed=1
  fi
  mapfile -t stale < <(owned_namespaces "$prefix")
  [[ ${#stale[@]} -eq 0 ]] && return 0
  if [[ $clean_stale -eq 1 || $reclaimed -eq 1 ]]; then
    echo "emulate.sh: removing stale namespaces: ${stale[*]}" >&2
    remove_namespaces "${stale[@]}"
  else
    rm -f "$owner_file"
    die "namespaces ${stale[*]} already exist but no running emulate.sh owns them;" \
        "rerun with --clean-stale to remove them, or use another --prefix"
  fi
}

# Stops the processes still inside the given namespaces (TERM, then KILL), then deletes them.
remove_namespaces() {
  local ns pids=() waited=0
  for ns in "$@"; do
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
    if [[ ${#pids[@]} -gt 0 ]]; then kill -TERM "${pids[@]}" 2>/dev/null || true; fi
  done
  for ns in "$@"; do
    while [[ -n "$(ip netns pids "$ns" 2>/dev/null || true)" && $waited -lt 30 ]]; do
      sleep 0.1   # processes we just signalled are exiting; there is no event to wait on
      waited=$(( waited + 1 ))
    done
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
    if [[ ${#pids[@]} -gt 0 ]]; then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
    ip netns del "$ns" 2>/dev/null || true
  done
}

teardown() {
  local prefix=$1 owner_file=$2 namespaces=()
  set +e
  mapfile -t namespaces < <(owned_namespaces "$prefix")
  [[ ${#namespaces[@]} -gt 0 ]] && remove_namespaces "${namespaces[@]}"
  rm -f "$owner_file"
  echo "emulate.sh: torn down ${prefix}-*" >&2
}

# shape NAMESPACE DEVICE RATE: a token bucket on the device's egress.
#  burst: one millisecond of traffic at the rate, and at least 64 KiB. A tbf bucket must hold
#    the largest packet it sees; veth hands it GSO packets of up to 64 KiB, and a smaller
#    bucket forces tbf to re-segment them in software. One millisecond bounds how far a short
#    transfer can run ahead of the rate (0.2% of a 64 MiB transfer at 1 Gbit/s).
#  latency: 10 ms of queue, like a NIC's default 1000-packet transmit queue at 1 Gbit/s
#    (1000 x 1500 B = 12 ms): enough that TCP keeps the link busy instead of backing off on
#    drops, small enough that queueing does not dominate round trips.
shape() {
  local ns=$1 dev=$2 rate=$3
  local bits
  case "$rate" in
    *gbit) bits=$(( ${rate%gbit} * 1000000000 )) ;;
    *mbit) bits=$(( ${rate%mbit} * 1000000 )) ;;
    *kbit) bits=$(( ${rate%kbit} * 1000 )) ;;
    *bit) bits=${rate%bit} ;;
  esac
  local burst=$(( bits / 8 / 1000 ))
  (( burst < 65536 )) && burst=65536
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 10ms
}

# build_cluster PREFIX N RATE: the hub namespace with bridge br0, and per rank a namespace
# whose eth0 is the far end of a veth pair vr<i> plugged into the bridge.
build_cluster() {
  local prefix=$1 n=$2 rate=$3
  local hub="${prefix}-hub"
  ip netns add "$hub"
  ip -n "$hub" link set lo up
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" addr add "${HUB_ADDR}/${SUBNET_BITS}" dev br0
  ip -n "$hub" link set br0 up
  local i ns
  for (( i = 0; i < n; i++ )); do
    ns="${prefix}-r${i}"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created inside the hub, with the peer placed straight into the rank's namespace: the
    # pair never exists in the root namespace.
    ip -n "$hub" link add "vr${i}" type veth peer name eth0 netns "$ns"
    ip -n "$hub" link set "vr${i}" master br0 up
    ip -n "$ns" addr add "${RANK_ADDRS[i]}/${SUBNET_BITS}" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ "$rate" != none ]]; then
      shape "$ns" eth0 "$rate"      # rank -> bridge (what the rank sends)
      shape "$hub" "vr${i}" "$rate" # bridge -> rank (what the rank receives)
    fi
  done
}
