#include "select/probe_measure.h"

#include <algorithm>
#include <vector>

#include "base/log.h"
#include "numeric/reduce.h"

namespace tidegate {

namespace {

// Latency: a few unmeasured round trips first (connections and caches warm up), then enough
// for a stable median on a shared machine.
constexpr size_t kPingBytes = 8;
constexpr int kPingWarmup = 3;
constexpr int kPingRounds = 15;

// Bandwidth: sizes grow by 4x from 64 KiB until one ring exchange takes kTargetMs, so that
// the two largest sizes dwarf fixed costs (rendezvous round trips, a tbf shaper's burst bucket
// of about 1 ms of traffic), which the slope between them cancels anyway.
constexpr size_t kFirstRingBytes = size_t{64} << 10;
constexpr size_t kMaxRingBytes = size_t{64} << 20;
constexpr size_t kRingGrowth = 4;
constexpr double kTargetMs = 30.0;
constexpr int kRingSamples = 3;  // of each of the two largest sizes; the median is used
// Below this share of the largest time the difference between the two sizes is mostly noise,
// and the slope would be unreliable: the plain rate of the largest size is used instead.
constexpr double kMinSlopeShare = 0.25;
// When the transport offers native collectives, the ring may use this share of the budget.
constexpr double kRingBudgetShareWithNative = 0.75;

// Native allreduce: a small size (latency) and a large one sized to take about
// kNativeTargetMs at the ring bandwidth, within [kNativeMinLarge, kNativeMaxLarge] floats.
constexpr int64_t kNativeSmallCount = 256;
constexpr int64_t kNativeMinLarge = int64_t{1} << 14;
constexpr int64_t kNativeMaxLarge = int64_t{1} << 20;
constexpr double kNativeTargetMs = 10.0;
constexpr int kNativeRounds = 3;

// Reduction: 8 MiB operands (24 MiB touched per pass) exceed common L2 and most L3 slices.
constexpr int64_t kReduceCount = int64_t{2} << 20;
constexpr int kReduceRounds = 5;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

// The partner of `rank` in latency phase 0 (pairs 2i, 2i+1), 1 (pairs 2i+1, 2i+2) or 2 (the
// ring's wrap-around link size-1, 0), or -1 when the rank sits the phase out.
int latency_partner(int phase, int rank, int size) {
  int partner = -1;
  if (phase == 0) partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (phase == 1) partner = rank % 2 == 1 ? rank + 1 : rank - 1;
  if (phase == 2 && size > 2) partner = rank == 0 ? size - 1 : (rank == size - 1 ? 0 : -1);
  return partner >= 0 && partner < size ? partner : -1;
}

bool starts_round_trips(int phase, int rank) {
  if (phase == 0) return rank % 2 == 0;
  if (phase == 1) return rank % 2 == 1;
  return rank == 0;
}

// Round trips with `peer`; returns the median one-way time in microseconds.
Status ping_pong(ProbeWire* wire, int peer, bool initiator, double* one_way_us) {
  char out[kPingBytes] = {};
  char in[kPingBytes] = {};
  std::vector<double> round_trips;
  for (int i = 0; i < kPingWarmup + kPingRounds; ++i) {
    const Clock::time_point start = Clock::now();
    if (initiator) {
      TG_RETURN_IF_ERROR(wire->exchange(peer, out, kPingBytes, -1, nullptr, 0));
      TG_RETURN_IF_ERROR(wire->exchange(-1, nullptr, 0, peer, in, kPingBytes));
    } else {
      TG_RETURN_IF_ERROR(wire->exchange(-1, nullptr, 0, peer, in, kPingBytes));
      TG_RETURN_IF_ERROR(wire->exchange(peer, out, kPingBytes, -1, nullptr, 0));
    }
    if (i >= kPingWarmup) round_trips.push_back(ms_since(start) * 1000.0);
  }
  // The responder's clock misses the first half trip, so only the initiator's figure counts;
  // the responder reports the same link from its own side when it initiates, or not at all.
  *one_way_us = initiator ? median(round_trips) / 2.0 : 0.0;
  return Status::ok();
}

// This rank's worst one-way latency over the links it took part in.
Status measure_latency(ProbeWire* wire, double* alpha_us) {
  *alpha_us = 0;
  for (int phase = 0; phase < 3; ++phase) {
    wire->next_phase();
    const int peer = latency_partner(phase, wire->rank(), wire->size());
    if (peer < 0) continue;
    double one_way = 0;
    TG_RETURN_IF_ERROR(ping_pong(wire, peer, starts_round_trips(phase, wire->rank()), &one_way));
    *alpha_us = std::max(*alpha_us, one_way);
  }
  return Status::ok();
}

// One ring exchange of `bytes`; *agreed_ms is the slowest rank's time and *elapsed_ms the
// latest rank's time since `start`, identical on every rank.
Status timed_ring(ProbeWire* wire, size_t bytes, std::vector<char>* send, std::vector<char>* recv,
                  Clock::time_point start, double* agreed_ms, double* elapsed_ms) {
  if (send->size() < bytes) send->resize(bytes, 1);
  if (recv->size() < bytes) recv->resize(bytes, 0);
  const int next = (wire->rank() + 1) % wire->size();
  const int prev = (wire->rank() + wire->size() - 1) % wire->size();
  wire->next_phase();
  const Clock::time_point begin = Clock::now();
  TG_RETURN_IF_ERROR(wire->exchange(next, send->data(), bytes, prev, recv->data(), bytes));
  std::vector<double> figures = {ms_since(begin), ms_since(start)};
  TG_RETURN_IF_ERROR(wire->ring_max(&figures));
  *agreed_ms = figures[0];
  *elapsed_ms = figures[1];
  return Status::ok();
}

// The cost of one collective step with every rank busy: tiny ring exchanges back to back (as a
// collective's steps follow each other), the slowest rank's time per exchange, median over
// rounds. A ping-pong sees one idle pair; a collective step also pays for sending while
// receiving and for neighbours that are a little late, which on the links measured here made a
// step cost up to twice the ping-pong's one-way time. Timing a run of exchanges rather than
// one keeps the skew left by the previous agreement out of the figure.
Status measure_ring_step(ProbeWire* wire, double* step_us) {
  constexpr int kBackToBack = 8;
  constexpr int kRounds = 5;
  const int next = (wire->rank() + 1) % wire->size();
  const int prev = (wire->rank() + wire->size() - 1) % wire->size();
  std::vector<char> send(kPingBytes, 1), recv(kPingBytes, 0);
  std::vector<double> rounds;
  for (int round = 0; round <= kRounds; ++round) {  // round 0 warms up
    wire->next_phase();
    const Clock::time_point begin = Clock::now();
    for (int i = 0; i < kBackToBack; ++i) {
      TG_RETURN_IF_ERROR(
          wire->exchange(next, send.data(), kPingBytes, prev, recv.data(), kPingBytes));
    }
    std::vector<double> per_step = {ms_since(begin) * 1e3 / kBackToBack};
    TG_RETURN_IF_ERROR(wire->ring_max(&per_step));
    if (round > 0) rounds.push_back(per_step[0]);
  }
  *step_us = median(rounds);
  return Status::ok();
}

// alpha is what a collective pays per step: the larger of the idle one-way latency and the
// busy ring step.
Status measure_step_latency(ProbeWire* wire, double* alpha_us) {
  double one_way_us = 0, step_us = 0;
  TG_RETURN_IF_ERROR(measure_latency(wire, &one_way_us));
  TG_RETURN_IF_ERROR(measure_ring_step(wire, &step_us));
  *alpha_us = std::max(one_way_us, step_us);
  return Status::ok();
}

struct RingSize {
  size_t bytes = 0;
  std::vector<double> ms;
};

// t = c + n / B between the two sizes; falls back to n / t of the larger when the difference
// is too small to trust.
double fit_bandwidth_GBps(const RingSize& small, const RingSize& large) {
  const double t1 = median(small.ms) / 1000.0;
  const double t2 = median(large.ms) / 1000.0;
  const double n1 = static_cast<double>(small.bytes);
  const double n2 = static_cast<double>(large.bytes);
  if (t2 <= 0) return kSelfBandwidthGBps;
  if (t2 - t1 < kMinSlopeShare * t2) return n2 / t2 / 1e9;
  return (n2 - n1) / (t2 - t1) / 1e9;
}

// Ring bandwidth, aiming to finish `until_ms` after `start` (agreed time).
Status measure_bandwidth(ProbeWire* wire, Clock::time_point start, double until_ms,
                         double* bandwidth_GBps) {
  // Lines the ranks up after the latency phases, where some sat out, before anything is timed.
  wire->next_phase();
  std::vector<double> barrier = {0.0};
  TG_RETURN_IF_ERROR(wire->ring_max(&barrier));

  std::vector<char> send;
  std::vector<char> recv;
  std::vector<RingSize> sizes;
  double elapsed = 0;
  for (size_t bytes = kFirstRingBytes;; bytes *= kRingGrowth) {
    double ms = 0;
    TG_RETURN_IF_ERROR(timed_ring(wire, bytes, &send, &recv, start, &ms, &elapsed));
    sizes.push_back({bytes, {ms}});
    // The next size costs about 4x this one, and then its repeats and the repeats of this one.
    const double next_cost = ms * (kRingGrowth + (kRingSamples - 1) * (1 + kRingGrowth));
    const bool grow =
        bytes * kRingGrowth <= kMaxRingBytes && ms < kTargetMs && elapsed + next_cost <= until_ms;
    if (sizes.size() >= 2 && !grow) break;
  }
  RingSize& small = sizes[sizes.size() - 2];
  RingSize& large = sizes.back();
  for (int sample = 1; sample < kRingSamples; ++sample) {
    if (elapsed + small.ms.front() + large.ms.front() > until_ms) break;
    for (RingSize* size : {&small, &large}) {
      double ms = 0;
      TG_RETURN_IF_ERROR(timed_ring(wire, size->bytes, &send, &recv, start, &ms, &elapsed));
      size->ms.push_back(ms);
    }
  }
  *bandwidth_GBps = fit_bandwidth_GBps(small, large);
  if (log_enabled(LogLevel::kDebug)) {
    std::string ladder;
    for (const RingSize& size : sizes) {
      ladder += " " + std::to_string(size.bytes >> 10) + "KiB:";
      for (double ms : size.ms) ladder += " " + std::to_string(ms);
    }
    log_message(LogLevel::kDebug, "rank " + std::to_string(wire->rank()),
                std::string("bandwidth probe on ") + wire->transport_name() + ", ring ms by size:" +
                    ladder + " -> " + std::to_string(*bandwidth_GBps) + " GB/s");
  }
  return Status::ok();
}

// Median time of kNativeRounds native allreduces of `count` floats (after one warm-up), in us.
// *offered turns false when the transport answers UNSUPPORTED after all.
Status time_native(ProbeWire* wire, int64_t count, double* us, bool* offered) {
  std::vector<float> input(static_cast<size_t>(count), 1.0f);
  std::vector<float> output(static_cast<size_t>(count), 0.0f);
  NativeCollectiveArgs args;
  args.input = input.data();
  args.output = output.data();
  args.count = count;
  std::vector<double> times;
  for (int round = 0; round <= kNativeRounds; ++round) {
    const Clock::time_point begin = Clock::now();
    Status st = wire->run_native(args);
    if (st.code() == TIDEGATE_ERR_UNSUPPORTED) {
      *offered = false;
      return Status::ok();
    }
    TG_RETURN_IF_ERROR(st);
    if (round > 0) times.push_back(ms_since(begin) * 1000.0);
  }
  *us = median(times);
  return Status::ok();
}

// Native allreduce at a small and a large size, fitted like alpha/beta with the bus bandwidth
// factor 2(P-1)/P of an allreduce. Leaves zeros when the transport does not offer it.
Status measure_native(ProbeWire* wire, TransportFigures* figures) {
  const double factor = 2.0 * (wire->size() - 1) / wire->size();
  // Sized from the agreed ring bandwidth, so every rank picks the same count.
  const double target_bytes = figures->bandwidth_GBps * 1e9 * (kNativeTargetMs / 1000.0) / factor;
  const int64_t large = std::clamp(static_cast<int64_t>(target_bytes / sizeof(float)),
                                   kNativeMinLarge, kNativeMaxLarge);
  wire->next_phase();
  bool offered = true;
  double small_us = 0;
  double large_us = 0;
  TG_RETURN_IF_ERROR(time_native(wire, kNativeSmallCount, &small_us, &offered));
  if (offered) TG_RETURN_IF_ERROR(time_native(wire, large, &large_us, &offered));
  if (!offered) return Status::ok();
  const double n1 = static_cast<double>(kNativeSmallCount * sizeof(float)) * factor;
  const double n2 = static_cast<double>(large * static_cast<int64_t>(sizeof(float))) * factor;
  const double bytes_per_us =
      large_us > small_us ? (n2 - n1) / (large_us - small_us) : n2 / large_us;
  figures->native_bandwidth_GBps = bytes_per_us / 1000.0;
  figures->native_alpha_us = std::max(0.0, small_us - n1 / bytes_per_us);
  figures->native_max_bytes = static_cast<double>(large * static_cast<int64_t>(sizeof(float)));
  return Status::ok();
}

bool offers_native_allreduce(const Transport& transport) {
  return transport.capabilities().native_allreduce &&
         transport.supports_native(NativeCollective::kAllreduce, TIDEGATE_FLOAT32, TIDEGATE_SUM,
                                   TIDEGATE_MEMORY_HOST);
}

}  // namespace

Status measure_transport(ProbeWire* wire, Clock::time_point probe_start, double until_ms,
                         TransportFigures* figures) {
  *figures = TransportFigures();
  figures->transport = wire->transport_name();
  if (wire->size() == 1) {
    figures->bandwidth_GBps = kSelfBandwidthGBps;
    return Status::ok();
  }
  // Every decision below must be the same on every rank, so the start of this transport's
  // turn is agreed too (a rank-local clock reading once let the ranks choose different ring
  // sizes, which the header check caught as a count mismatch).
  wire->next_phase();
  std::vector<double> begin = {ms_since(probe_start)};
  TG_RETURN_IF_ERROR(wire->ring_max(&begin));
  const double begin_ms = begin[0];
  TG_RETURN_IF_ERROR(measure_step_latency(wire, &figures->alpha_us));
  const bool native = offers_native_allreduce(*wire->transport());
  // The ring leaves part of what remains to the native measurement when there is one.
  const double ring_until_ms =
      native ? begin_ms + (until_ms - begin_ms) * kRingBudgetShareWithNative : until_ms;
  TG_RETURN_IF_ERROR(measure_bandwidth(wire, probe_start, ring_until_ms, &figures->bandwidth_GBps));
  if (native) TG_RETURN_IF_ERROR(measure_native(wire, figures));
  // Once more at the end, keeping the lower: a transient stall (another process scheduled, a
  // peer still finishing its start-up) inflates one measurement, rarely two far apart, and
  // an inflated alpha would hand every small collective to another transport.
  double again_us = 0;
  TG_RETURN_IF_ERROR(measure_step_latency(wire, &again_us));
  figures->alpha_us = std::min(figures->alpha_us, again_us);
  return Status::ok();
}

double measure_reduce_GBps() {
  std::vector<float> accumulator(static_cast<size_t>(kReduceCount), 1.0f);
  std::vector<float> operand(static_cast<size_t>(kReduceCount), 0.5f);
  std::vector<double> seconds;
  // Round 0 warms the pages and caches and is not counted.
  for (int round = 0; round <= kReduceRounds; ++round) {
    const Clock::time_point begin = Clock::now();
    reduce(accumulator.data(), accumulator.data(), operand.data(), kReduceCount, TIDEGATE_FLOAT32,
           TIDEGATE_SUM);
    if (round > 0) seconds.push_back(ms_since(begin) / 1000.0);
  }
  const double s = median(seconds);
  const double bytes = static_cast<double>(kReduceCount) * sizeof(float);
  return s > 0 ? bytes / s / 1e9 : kSelfBandwidthGBps;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace tidegate
