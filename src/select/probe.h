// The bandwidth probe: measures, when a communicator is created, the latency and bandwidth of
// each of its transports between the ranks and the local reduction throughput, and agrees on
// the figures across ranks so that every rank plans identically.
//
// Method (bounded by TIDEGATE_PROBE_BUDGET_MS in total):
//  - latency: ping-pong in pairs (rank 2i <-> 2i+1, then 2i+1 <-> 2i+2 so every link is seen),
//    small messages, the median round trip / 2;
//  - bandwidth: a ring exchange (every rank sends to rank+1 while receiving from rank-1, so
//    every link is busy as in a ring collective) at growing sizes, fitting t = alpha + n/B
//    over the two largest sizes measured;
//  - reduction: the sum kernel over a buffer larger than the caches;
//  - native collectives, when a transport offers them: a small and a large native allreduce.
// Agreement: each rank publishes its figures under the store; rank 0 combines them (largest
// alpha, smallest bandwidth and reduction throughput: the slowest link bounds a collective)
// and publishes the result; every rank parses the same text.
// Cache: with TIDEGATE_PROBE_CACHE=<file>, rank 0 loads the file when it holds a profile for
// the same size and transports (then nobody measures) and writes it after measuring.
// Store keys: probe/mode, probe/figures/<rank>, probe/agreed; they are written once, so a
// store (scope) serves one probe. A single rank uses neither wire nor store: its links are
// alpha 0 and kSelfBandwidthGBps (select/probe_measure.h); only the reduction is measured.
// Messages use channel kProbeChannel (select/probe_exchange.h) with OpKind::kInternal headers.
#pragma once

#include <vector>

#include "base/config.h"
#include "base/store.h"
#include "base/transport.h"
#include "select/probe_profile.h"

namespace tidegate {

struct ProbeInputs {
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  const Config* config = nullptr;
  Store* store = nullptr;              // comm-scoped; the probe uses keys under "probe/"
  std::vector<Transport*> transports;  // connected, engine not started yet
  Deadline deadline = Deadline::after_ms(0);
};

// Collective over all ranks. Measures (or loads from the cache) and agrees; *profile is
// identical on every rank. With TIDEGATE_PROBE=off returns ProbeProfile::defaults() without
// touching the wire. Errors name the transport and peer that failed.
Status run_probe(const ProbeInputs& inputs, ProbeProfile* profile);

}  // namespace tidegate
