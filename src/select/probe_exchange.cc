#include "select/probe_exchange.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tidegate {

namespace {

// How long one progress() call may block: short, so the deadline is checked often, while an
// event-driven transport still wakes at once when bytes arrive (no latency is added).
constexpr Milliseconds kPollSlice(1);

}  // namespace

ProbeWire::ProbeWire(Transport* transport, int rank, int size, uint64_t comm_id, Deadline deadline,
                     std::string purpose)
    : transport_(transport),
      rank_(rank),
      size_(size),
      comm_id_(comm_id),
      deadline_(deadline),
      purpose_(std::move(purpose)),
      // A quarter of the time the probe has, as the engine's collectives use a quarter of
      // TIDEGATE_TIMEOUT_MS (between 50 ms and 1 s).
      liveness_interval_(std::clamp(
          std::chrono::duration_cast<Milliseconds>(deadline.remaining()) / 4, Milliseconds(50),
          Milliseconds(1000))),
      last_activity_(Clock::now()) {}

void ProbeWire::keep_alive(bool activity) {
  const Clock::time_point now = Clock::now();
  if (activity) last_activity_ = now;
  if (!transport_->tracks_liveness()) return;
  if (now - last_activity_ > liveness_interval_ && now - last_liveness_sent_ > liveness_interval_) {
    last_liveness_sent_ = now;
    transport_->send_liveness();
  }
}

std::string ProbeWire::silent_peers_note() const {
  const Clock::time_point now = Clock::now();
  // Only after a stall long enough for notices to have gone out and been answered.
  if (!transport_->tracks_liveness() || now - last_activity_ <= 2 * liveness_interval_) return "";
  std::vector<int> silent;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && now - transport_->last_heard(peer) > 2 * liveness_interval_) {
      silent.push_back(peer);
    }
  }
  if (silent.empty()) return "";
  std::string ranks;
  for (size_t i = 0; i < silent.size(); ++i) {
    ranks += (i == 0 ? "" : i + 1 == silent.size() ? " and " : ", ");
    ranks += std::to_string(silent[i]);
  }
  return std::string("; rank") + (silent.size() == 1 ? " " : "s ") + ranks +
         (silent.size() == 1 ? " has" : " have") + " given no sign of life for " +
         std::to_string((2 * liveness_interval_).count()) +
         " ms or more: stopped, hung or dead (every other rank answered)";
}

void ProbeWire::next_phase() {
  ++phase_;
  step_ = 0;
}

WireHeader ProbeWire::header(int sender, size_t bytes) const {
  WireHeader h;
  h.op_kind = OpKind::kInternal;
  h.dtype = TIDEGATE_UINT8;
  h.comm_id = comm_id_;
  h.op_seq = step_;
  h.chunk = phase_;
  h.count = static_cast<int64_t>(bytes);
  h.payload_bytes = bytes;
  h.sender_rank = static_cast<uint32_t>(sender);
  return h;
}

std::string ProbeWire::where(int peer) const {
  return purpose_ + " on transport " + transport_->name() + ", rank " + std::to_string(rank_) +
         " with rank " + std::to_string(peer) + " (phase " + std::to_string(phase_) + ", step " +
         std::to_string(step_) + "): ";
}

Status ProbeWire::exchange(int send_to, const void* send, size_t send_bytes, int recv_from,
                           void* recv, size_t recv_bytes) {
  Transport::Handle recv_handle = 0;
  Transport::Handle send_handle = 0;
  // The receive goes first so that a rendezvous transport can answer the peer's send at once.
  if (recv_from >= 0) {
    Status st = transport_->irecv(recv_from, kProbeChannel, header(recv_from, recv_bytes), recv,
                                  recv_bytes, &recv_handle);
    if (!st.is_ok()) return std::move(st).with_context(where(recv_from) + "posting a receive: ");
  }
  if (send_to >= 0) {
    Status st = transport_->isend(send_to, kProbeChannel, header(rank_, send_bytes), send,
                                  send_bytes, &send_handle);
    if (!st.is_ok()) return std::move(st).with_context(where(send_to) + "posting a send: ");
  }
  TG_RETURN_IF_ERROR(wait_pair(send_handle, send_to, recv_handle, recv_from));
  ++step_;
  return Status::ok();
}

Status ProbeWire::wait_pair(Transport::Handle send, int send_to, Transport::Handle recv,
                            int recv_from) {
  bool send_done = send == 0;
  bool recv_done = recv == 0;
  while (!send_done || !recv_done) {
    bool activity = false;
    const Milliseconds slice = std::min(kPollSlice, deadline_.remaining());
    Status progressed = transport_->progress(slice, &activity);
    keep_alive(activity);
    if (!send_done) {
      Status st = transport_->test(send, &send_done);
      if (!st.is_ok()) return std::move(st).with_context(where(send_to) + "sending: ");
    }
    if (!recv_done) {
      Status st = transport_->test(recv, &recv_done);
      if (!st.is_ok()) return std::move(st).with_context(where(recv_from) + "receiving: ");
    }
    if (!progressed.is_ok()) {
      return std::move(progressed).with_context(where(send_done ? recv_from : send_to));
    }
    if ((!send_done || !recv_done) && deadline_.passed()) {
      const int peer = send_done ? recv_from : send_to;
      return timeout_error(where(peer) +
                           "no answer before the deadline (is that rank alive and "
                           "running the same tidegate build? raise TIDEGATE_TIMEOUT_MS if the "
                           "job is merely slow to start)" + silent_peers_note());
    }
  }
  return Status::ok();
}

Status ProbeWire::wait(Transport::Handle handle, const std::string& what) {
  bool done = false;
  while (!done) {
    bool activity = false;
    const Milliseconds slice = std::min(kPollSlice, deadline_.remaining());
    Status progressed = transport_->progress(slice, &activity);
    keep_alive(activity);
    Status st = transport_->test(handle, &done);
    const std::string context = std::string("bandwidth probe on transport ") + transport_->name() +
                                ", rank " + std::to_string(rank_) + ", " + what + ": ";
    if (!st.is_ok()) return std::move(st).with_context(context);
    if (!progressed.is_ok()) return std::move(progressed).with_context(context);
    if (!done && deadline_.passed())
      return timeout_error(context + "not finished before the deadline" + silent_peers_note());
  }
  return Status::ok();
}

Status ProbeWire::run_native(const NativeCollectiveArgs& args) {
  WireHeader h;
  h.op_kind = OpKind::kAllreduce;
  h.dtype = static_cast<uint8_t>(args.dtype);
  h.reduce_op = static_cast<uint8_t>(args.reduce_op);
  h.comm_id = comm_id_;
  h.op_seq = step_;
  h.chunk = phase_;
  h.count = args.count;
  h.payload_bytes = static_cast<uint64_t>(args.count) * dtype_size(args.dtype);
  h.sender_rank = static_cast<uint32_t>(rank_);
  Transport::Handle handle = 0;
  Status posted = transport_->post_native(h, args, &handle);
  if (posted.code() == TIDEGATE_ERR_UNSUPPORTED) return posted;
  const std::string what = "native allreduce of " + std::to_string(args.count) + " floats";
  if (!posted.is_ok()) {
    return std::move(posted).with_context(std::string("bandwidth probe on transport ") +
                                          transport_->name() + ", rank " + std::to_string(rank_) +
                                          ", posting a " + what + ": ");
  }
  TG_RETURN_IF_ERROR(wait(handle, what));
  ++step_;
  return Status::ok();
}

Status ProbeWire::ring_max(std::vector<double>* values) {
  if (size_ <= 1 || values->empty()) return Status::ok();
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  const size_t bytes = values->size() * sizeof(double);
  std::vector<double> outgoing(values->size());
  std::vector<double> incoming(values->size());
  // Each step forwards the running maximum, so after size-1 steps it covers every rank.
  for (int step = 1; step < size_; ++step) {
    outgoing = *values;
    TG_RETURN_IF_ERROR(exchange(next, outgoing.data(), bytes, prev, incoming.data(), bytes));
    for (size_t i = 0; i < values->size(); ++i) {
      if (incoming[i] > (*values)[i]) (*values)[i] = incoming[i];
    }
  }
  return Status::ok();
}

}  // namespace tidegate
