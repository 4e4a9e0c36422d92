// Blocking message steps for the bandwidth probe. The probe runs while a communicator is being
// created, before its progress engine starts, so it drives the transport directly from the
// calling thread (then the only user of the transport) and waits for each step to finish.
//
// Every message carries an OpKind::kInternal header on a channel of its own (kProbeChannel)
// whose `chunk` is the probe phase and whose `op_seq` is the step inside the phase, so ranks
// that drift apart fail with a header mismatch that names both ranks instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/transport.h"
#include "base/types.h"

namespace tidegate {

// No collective uses it (tasks use channel 0). Kept small on purpose: MPI guarantees tags only
// up to 32767 (two tags per channel) and UCX packs channels into 30 bits.
inline constexpr uint32_t kProbeChannel = 16000;

class ProbeWire {
 public:
  // `transport` must stay valid and unused by anyone else while the wire is used. `purpose`
  // starts every error message ("bandwidth probe", "end-of-creation barrier").
  ProbeWire(Transport* transport, int rank, int size, uint64_t comm_id, Deadline deadline,
            std::string purpose = "bandwidth probe");

  int rank() const { return rank_; }
  int size() const { return size_; }
  const char* transport_name() const { return transport_->name(); }
  Transport* transport() const { return transport_; }
  Deadline deadline() const { return deadline_; }

  // Starts the next phase: every rank calls it at the same points, so phases line up.
  void next_phase();

  // Sends `send_bytes` of `send` to `send_to` while receiving `recv_bytes` into `recv` from
  // `recv_from`, and returns once both have finished. A peer of -1 skips that direction. The
  // receive expects exactly `recv_bytes`. Errors name the transport and the peer.
  Status exchange(int send_to, const void* send, size_t send_bytes, int recv_from, void* recv,
                  size_t recv_bytes);

  // Replaces each value by its maximum over all ranks (a ring pass of size-1 steps), so every
  // rank ends with identical bits and can take identical decisions.
  Status ring_max(std::vector<double>* values);

  // Runs one native collective (post_native with a header every rank builds alike) and waits
  // for it. The transport's UNSUPPORTED comes back unchanged so the caller can skip it.
  Status run_native(const NativeCollectiveArgs& args);

 private:
  WireHeader header(int sender, size_t bytes) const;
  Status wait_pair(Transport::Handle send, int send_to, Transport::Handle recv, int recv_from);
  std::string where(int peer) const;
  Status wait(Transport::Handle handle, const std::string& what);
  // Liveness, as the engine's collectives do it: after a while without progress, a notice to
  // every peer (they answer), so that a deadline error can name the ranks that gave no sign of
  // life (a stopped rank) apart from the ones that merely wait as well.
  void keep_alive(bool activity);
  std::string silent_peers_note() const;

  Transport* transport_;
  int rank_;
  int size_;
  uint64_t comm_id_;
  Deadline deadline_;
  std::string purpose_;
  uint32_t phase_ = 0;
  uint64_t step_ = 0;
  Milliseconds liveness_interval_;
  Clock::time_point last_activity_;
  Clock::time_point last_liveness_sent_;
};

}  // namespace tidegate
