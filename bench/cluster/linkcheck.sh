#!/usr/bin/env bash
# linkcheck.sh: an iperf-like check of the emulated links, with tools every machine has
# (bash's /dev/tcp to send, perl to receive). Run inside emulate.sh:
#   bench/cluster/emulate.sh -n 2 --rate 1gbit -- bench/cluster/linkcheck.sh [MiB]
# Sends MiB (default 64) from rank 1 to rank 0 and prints the rate the receiver measured
# from the first byte to the last.
set -euo pipefail
mib=${1:-64}
: "${TGC_NS_PREFIX:?run me inside bench/cluster/emulate.sh}"
IFS=, read -r -a addrs <<< "$TGC_RANK_ADDRS"
[[ ${#addrs[@]} -ge 2 ]] || { echo "linkcheck.sh: needs -n 2 or more" >&2; exit 2; }
port=5201
out=$(mktemp)
trap 'rm -f "$out"; [[ -n "${sink:-}" ]] && kill "$sink" 2>/dev/null; true' EXIT

# shellcheck disable=SC2016  # the single-quoted text is perl, not shell
ip netns exec "${TGC_NS_PREFIX}0" perl -MIO::Socket::INET -MTime::HiRes=time -e '
  my ($addr, $port) = @ARGV;
  my $server = IO::Socket::INET->new(LocalAddr => $addr, LocalPort => $port, Listen => 1,
                                     ReuseAddr => 1) or die "listen: $!";
  $| = 1; print "listening\n";
  my $client = $server->accept() or die "accept: $!";
  my ($bytes, $start, $buf) = (0, 0, "");
  while (my $n = sysread($client, $buf, 1 << 20)) { $start ||= time; $bytes += $n; }
  my $secs = time - $start;
  printf "%d bytes in %.3f s = %.1f Mbit/s\n", $bytes, $secs, $bytes * 8 / $secs / 1e6;
' "${addrs[0]}" "$port" > "$out" &
sink=$!
for _ in $(seq 100); do grep -q listening "$out" && break; sleep 0.05; done
grep -q listening "$out" || { echo "linkcheck.sh: the receiver did not start" >&2; exit 1; }
ip netns exec "${TGC_NS_PREFIX}1" bash -c \
  "head -c $(( mib << 20 )) /dev/zero > /dev/tcp/${addrs[0]}/${port}"
wait "$sink"
sink=""
echo "linkcheck rank1 -> rank0 (rate ${TGC_RATE}): $(grep bytes "$out")"
