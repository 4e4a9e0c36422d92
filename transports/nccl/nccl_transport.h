// The NCCL transport (DESIGN.md "Transport"): messages and native collectives between the GPUs
// of one communicator, CUDA device memory only (host pointers are rejected, not staged).
//
// Set-up: rank 0 draws two ncclUniqueIds and publishes them (hex) under "nccl/ids" in the
// bootstrap store; every rank picks its device (the launcher's local rank modulo the visible
// devices, else rank modulo devices) and creates two non-blocking communicators
// (config.blocking = 0), polling ncclCommGetAsyncError until they are ready or the creation
// deadline passes (then ncclCommAbort and TIMEOUT). Two communicators because NCCL runs the
// operations of one communicator in the order they were enqueued: the header communicator
// carries only 64-byte headers, so a header never waits behind a payload that waits for the
// peer's header check.
//
// How a message travels: the 64-byte encoded WireHeader (copied from a pinned host slot to a
// device slot) as its own ncclSend on the header communicator, then the payload straight from /
// into the user's buffer on the data communicator. NCCL p2p has no tags: messages between two
// ranks arrive in posting order, so the k-th header / payload from A pairs with B's k-th
// receive from A. The receiver copies the header back to the host, checks it with
// check_wire_header() and only then posts the payload receive with the length it expects:
// no payload byte is stored before the check, and a sender whose length differs can never make
// NCCL receive a mismatched count. A mismatch fails the transport (the streams are no longer
// paired).
//
// Channels: NCCL has none. Channels are kept apart only because the receiver's header check
// sees op_seq and chunk: two ranks that post messages of different channels in different
// orders get a MISMATCH, never a silent mix-up.
//
// Grouping and its limit: everything that becomes ready in one progress() round is posted as
// one ncclGroupStart/End per communicator, so NCCL runs those sends and receives concurrently
// (a rank's send to B and receive from B must be in one group, or a large send waits forever
// for a receive queued behind it). Payload sends are held back while any receive still waits
// for its header, so an exchange's payload send and payload receive leave in the same group.
// This covers round-based exchanges (post all, then wait), not every pattern: an algorithm
// that posts receives ahead whose headers depend on this rank's held-back sends stalls, so the
// capabilities say receives_ahead = false and such algorithms post round by round here. The
// engine's deadline turns any stall left into an error and abort(), never a hang.
//
// Native collectives: the ranks' headers are gathered with ncclAllGather (64 bytes each) on the
// data communicator, copied to the host and checked; only when all match is the
// ncclAllReduce / ncclAllGather / ncclReduceScatter posted, so on a mismatch no rank posts it
// and every rank fails the op with the same error (the communicator stays usable).
//
// A killed peer: NCCL does not reliably report a rank whose process died (its kernels may
// wait on the dead peer's memory or socket until the deadline), so with TIDEGATE_EXIT_WATCH=on
// (the default) the transport holds a tcp::PacedExitWatch (transports/tcp/paced_exit_watch.h),
// as the mpi transport does: one idle TCP connection per peer, looked at in step(); a peer
// whose process ended fails the transport, naming it, a short grace after it is seen.
//
// Completion: a transfer is done when the CUDA events recorded after its NCCL work completed
// (cudaEventQuery), never when the work was merely enqueued.
//
// Threading: every call is made under mutex_. With a non-blocking communicator NCCL may return
// ncclInProgress from an enqueue; the transport then polls ncclCommGetAsyncError before any
// further call on it (as NCCL requires), watching abort_requested_ so that abort() from another
// thread waits at most one poll before it takes the mutex and calls ncclCommAbort.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/transport.h"
#include "transports/tcp/paced_exit_watch.h"

namespace tidegate {

// The factory registered in the transport table (name "nccl").
Status create_nccl_transport(const TransportContext& context,
                             std::unique_ptr<Transport>* transport);

namespace nccl {

inline constexpr uint32_t kHeaderSlots = 4096;  // p2p transfers in flight at once
inline constexpr uint32_t kNativeSlots = 64;    // native collectives in flight at once
inline constexpr int kMaxSleepMs = 2;           // progress() naps: events have no fd to wait on

// A failed CUDA runtime call as SYSTEM, naming the rank and the call.
Status cuda_error(const std::string& who, const char* what, cudaError_t error);
// A failed NCCL call: PEER_FAILED for remote / system errors, INTERNAL for misuse.
Status nccl_error(const std::string& who, const char* what, ncclResult_t result);
// NCCL's types for ours; false when NCCL has none.
bool nccl_dtype(tidegate_dtype_t dtype, ncclDataType_t* out);
bool nccl_op(tidegate_reduce_op_t op, ncclRedOp_t* out);

// Makes `device` current for one call and restores the caller's device afterwards: abort() and
// close() may run on the application's threads, whose current device is theirs to keep.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) cudaSetDevice(device_);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = -1;
};

// Fixed-size slots of device memory with a pinned host mirror, allocated once: the headers
// must live in device memory for NCCL and on the host for the check.
class SlotPool {
 public:
  Status init(const std::string& who, size_t slot_bytes, uint32_t slots);
  void release();
  bool take(uint32_t* slot);
  void give(uint32_t slot) { free_.push_back(slot); }
  void* device(uint32_t slot) const { return device_ + size_t{slot} * slot_bytes_; }
  unsigned char* host(uint32_t slot) const { return host_ + size_t{slot} * slot_bytes_; }

 private:
  size_t slot_bytes_ = 0;
  char* device_ = nullptr;
  unsigned char* host_ = nullptr;
  std::vector<uint32_t> free_;
};

class NcclTransport final : public Transport {
 public:
  // Collective over the communicator's ranks (see the file comment).
  static Status create(const TransportContext& context, std::unique_ptr<Transport>* out);
  ~NcclTransport() override;

  const char* name() const override { return "nccl"; }
  TransportCapabilities capabilities() const override;
  // peer may be this rank: NCCL delivers to itself when send and receive share a group.
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override;
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override;
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override;
  Status progress(Milliseconds max_wait, bool* activity) override;
  bool supports_native(NativeCollective kind, tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                       tidegate_memory_t memory) const override;
  Status post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                     Handle* handle) override;
  void wake() override;
  void abort(const Status& reason) override;
  Status close(Deadline deadline) override;

  int device() const { return device_; }

 private:
  enum class Kind : uint8_t { kSend, kRecv, kNative };
  enum class Stage : uint8_t {
    kQueued,        // header (or native header gather) not yet posted
    kHeader,        // header posted; receive / native: waiting for it on the host
    kPayloadReady,  // header fine; payload waits for the next data group
    kRunning,       // payload / collective posted; waiting for done_event
    kDone,
  };
  struct Op {
    Kind kind = Kind::kSend;
    Stage stage = Stage::kQueued;
    int peer = 0;
    WireHeader header;  // send: what is sent; receive / native: what this rank expects
    void* data = nullptr;
    size_t bytes = 0;
    uint32_t slot = 0;  // in headers_ (p2p) or gathers_ (native)
    bool has_slot = false;
    cudaEvent_t header_event = nullptr;
    cudaEvent_t done_event = nullptr;
    NativeCollectiveArgs native;
    Status status;
  };

  NcclTransport(const TransportContext& context, int device);

  // ---- nccl_setup.cc
  Status init(const TransportContext& context);
  Status exchange_ids(const TransportContext& context, ncclUniqueId ids[2]);
  Status init_comm(const ncclUniqueId& id, Deadline deadline, ncclComm_t* comm);
  Status check_device_pointer(const void* ptr, const char* what) const;

  // ---- nccl_transport.cc
  Status check_usable(int peer) const;
  Status new_op(Kind kind, int peer, const WireHeader& header, void* data, size_t bytes,
                Handle* handle);
  // Waits (bounded by deadline_ms_) until `comm` finished the enqueue that returned
  // ncclInProgress; the error of a failed enqueue otherwise.
  Status settle(ncclComm_t comm, ncclResult_t result, const char* what);
  Status post_header_group(bool* moved);
  Status check_headers(bool* moved);
  Status post_payload_group(bool* moved);
  Status finish_header(Op& op, Handle handle);
  Status record(cudaEvent_t* event, cudaStream_t stream);
  // Stage kRunning -> kDone when done_event completed.
  Status poll_done(Op& op, bool* moved);
  Status step(bool* moved);

  // ---- nccl_native.cc
  Status post_native_headers(Op& op);
  Status check_native_headers(Op& op, bool* moved);
  Status post_collective(Op& op);

  // ---- nccl_shutdown.cc
  void fail(const Status& status);
  void abort_comms();
  void release_op(Op& op);
  void release_resources();
  Status finish(Deadline deadline);

  const int rank_;
  const int size_;
  const int device_;
  const int64_t deadline_ms_;  // bound on one enqueue's wait (the config's timeout)
  const std::string who_;      // "rank 3 (nccl, cuda:0)", for messages

  std::mutex mutex_;  // guards everything below and serialises our NCCL / CUDA calls
  ncclComm_t header_comm_ = nullptr;
  ncclComm_t data_comm_ = nullptr;
  cudaStream_t header_stream_ = nullptr;
  cudaStream_t data_stream_ = nullptr;
  SlotPool headers_;
  SlotPool gathers_;
  std::map<Handle, Op> ops_;  // ordered by handle = posting order
  Handle next_handle_ = 1;
  Status failed_;
  bool closed_ = false;
  std::unique_ptr<tcp::PacedExitWatch> exit_watch_;  // null with TIDEGATE_EXIT_WATCH=off
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> woken_{false};
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
};

}  // namespace nccl
}  // namespace tidegate
