// The probe's measurements on one rank: latency by ping-pong, bandwidth by a ring exchange at
// growing sizes, native allreduce times, and the local reduction throughput. Each is collective
// over the ranks of the wire (except the reduction), and every decision that changes what is
// sent (how far the sizes grow, how often a size repeats) is taken from figures agreed with
// ProbeWire::ring_max, never from a rank's own clock alone: a rank that decided alone would
// stop sending while its neighbour still waits.
#pragma once

#include "base/status.h"
#include "select/probe_exchange.h"
#include "select/probe_profile.h"

namespace tidegate {

// Bandwidth figure of a communicator of one rank, which sends nothing: effectively free, but
// finite so that a cost model can divide by it.
inline constexpr double kSelfBandwidthGBps = 1000.0;

// Milliseconds since `start`, on the probe's clock.
double ms_since(Clock::time_point start);

// Measures one transport's figures on this rank (latency, ring bandwidth, native allreduce
// when offered), aiming to finish by `until_ms` after `probe_start`. Time is reckoned as the
// slowest rank's (agreed over the wire), so the reduction measurement and the transports
// probed before count too, and every rank decides alike. Collective over the wire.
Status measure_transport(ProbeWire* wire, Clock::time_point probe_start, double until_ms,
                         TransportFigures* figures);

// Median float32 sum throughput of the reduction kernel over buffers larger than the caches,
// in 1e9 bytes of one operand per second (the message bytes a reduction step consumes).
double measure_reduce_GBps();

}  // namespace tidegate
