// The MPI transport (DESIGN.md "Transport"): point-to-point messages on a private duplicate of
// the MPI communicator the tidegate communicator was created over (or MPI_COMM_WORLD when it
// was created from the environment or a store and MPI_COMM_WORLD's ranks are the same ranks).
//
// How a message travels:
//  - Every message is a 64-byte encoded WireHeader on the channel's header tag followed by its
//    payload, straight from / into the user's buffer, on the channel's payload tag, split into
//    chunks of at most `chunk_bytes` (1 GiB) so that byte counts fit MPI's `int` counts. Two
//    tags per channel rather than one packed message: packing would copy the payload. MPI's
//    non-overtaking rule (per source, tag and communicator) pairs the k-th header and the k-th
//    payload of a (peer, channel) with the k-th irecv, as long as payload receives are posted in
//    irecv order, which a per-(peer, channel) queue keeps.
//  - The receiver posts the header receive at once and the payload receive only after the
//    header passed check_wire_header(): no payload byte is stored before the check (as the
//    interface demands), and a sender whose payload is longer than expected can never overrun
//    the user's buffer (Open MPI's shared-memory single-copy path does overrun on truncation).
//    The cost is that a payload may wait as an unexpected message until the next poll. A
//    mismatch fails the transfer and the whole transport (the tag streams are no longer
//    paired) and tells every peer.
//  - Tag 0 carries abort messages (status code + text). Every rank keeps one receive for it
//    posted from MPI_ANY_SOURCE, so a peer's abort() reaches this rank's pending transfers.
//    The highest tag (MPI_TAG_UB) carries empty liveness pings, received the same way.
//  - A killed peer: MPI without ULFM (Open MPI 4.1, even under mpirun --enable-recovery) never
//    fails a receive from a dead rank, so with TIDEGATE_EXIT_WATCH=on (the default) the
//    transport also holds a tcp::PacedExitWatch (transports/tcp/paced_exit_watch.h), one idle
//    TCP connection per peer, looked at while polling: a peer whose process ended is named
//    within a fraction of a second, not at the deadline. The transport fails a grace period
//    after the watch saw the exit, polling MPI meanwhile, so that an op the dead rank's last
//    messages complete does not fail (the file comment there says why).
//
// Threading: needs MPI_THREAD_MULTIPLE (checked at creation; UNSUPPORTED otherwise). The
// transport's own MPI calls are serialised by its mutex, so they come from one thread at a
// time, almost always the progress thread. Pure funnelling through the progress thread is not
// enough: after a failure the engine stops calling progress(), so abort() must send the abort
// messages itself from whichever thread calls it; and the application may use MPI on its own
// communicators concurrently with our progress thread, which only MULTIPLE allows.
//
// Progress: MPI gives no file descriptor to wait on, so progress() polls MPI_Testsome, yielding
// the CPU between polls for the first ~50 us (low latency for pipelined steps) and then
// sleeping in short naps (kMaxNapUs) until max_wait, wake() or a completion. The naps stay
// short because with the TCP BTL bytes move only while some thread calls into MPI.
//
// Native collectives (mpi_native.cc): MPI_Iallreduce / MPI_Iallgather /
// MPI_Ireduce_scatter_block on a second private duplicate, so that they can never match
// the point-to-point traffic. Each op first allgathers every rank's 64-byte WireHeader and
// checks them; only then is the real collective posted. See mpi_native.cc for the ordering
// rule, large counts and what an abort does to a collective in flight.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/transport.h"
#include "transports/common/abort_message.h"
#include "transports/common/transfer_book.h"
#include "transports/mpi/mpi_semantics.h"
#include "transports/tcp/paced_exit_watch.h"

namespace tidegate {

// The factory registered in the transport table (name "mpi").
Status create_mpi_transport(const TransportContext& context, std::unique_ptr<Transport>* transport);

namespace mpi {

inline constexpr size_t kDefaultChunkBytes = size_t{1} << 30;
inline constexpr int kAbortTag = 0;
inline constexpr int kMaxNapUs = 200;
// A rank answers liveness pings at most this often.
inline constexpr int64_t kLivenessAnswerMs = 500;
// Most elements one MPI collective call takes: MPI-3 counts are `int`.
inline constexpr int64_t kMaxNativeElements = 2147483647;

struct MpiTransportOptions {
  // Largest MPI message a payload is split into; tests shrink it to exercise chunking.
  size_t chunk_bytes = kDefaultChunkBytes;
  // Largest element count of one native MPI call (allreduce chunks, allgather block types);
  // tests shrink it to exercise the large-count paths.
  int64_t native_max_elements = kMaxNativeElements;
};

class MpiTransport final : public Transport {
 public:
  // Collective over the communicator's ranks: agrees through context.store that every rank
  // can use MPI (initialised, MPI_THREAD_MULTIPLE, matching ranks) and then duplicates the
  // MPI communicator. Fails with UNSUPPORTED, naming the rank and the reason, otherwise.
  static Status create(const TransportContext& context, const MpiTransportOptions& options,
                       std::unique_ptr<Transport>* out);
  ~MpiTransport() override;

  const char* name() const override { return "mpi"; }
  TransportCapabilities capabilities() const override;
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override;
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override;
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override;
  Status progress(Milliseconds max_wait, bool* activity) override;
  void wake() override;
  bool tracks_liveness() const override { return true; }
  void send_liveness() override;
  Clock::time_point last_heard(int peer) const override;
  std::vector<int> awaited_peers() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return book_.awaited_peers(rank_);
  }
  void abort(const Status& reason) override;
  Status close(Deadline deadline) override;
  bool supports_native(NativeCollective kind, tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                       tidegate_memory_t memory) const override;
  Status post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                     Handle* handle) override;

  // MPI messages posted so far (headers and payload chunks); tests check the chunking.
  uint64_t messages_posted() const;

 private:
  enum class Part : uint8_t { kHeader, kChunk, kNativeHeaders, kNativeData };
  enum class NativeStage : uint8_t { kQueued, kGathering, kGathered, kRunning };
  struct NativeOp {  // a native collective's own state (mpi_native.cc)
    NativeCollectiveArgs args;
    NativeStage stage = NativeStage::kQueued;
    std::array<unsigned char, kWireHeaderBytes> mine{};  // this rank's encoded header
    std::vector<unsigned char> gathered;                 // every rank's, in rank order
  };
  struct Op : Transfer {
    std::unique_ptr<NativeOp> native;  // set for a native collective, null for a transfer
  };
  struct Slot {         // what one entry of requests_ belongs to
    Handle handle = 0;  // 0 once its op was failed: the request is only drained
    Part part = Part::kHeader;
    bool is_recv = false;
    size_t bytes = 0;  // the message's expected size
  };

  MpiTransport(const TransportContext& context, const MpiTransportOptions& options, MPI_Comm comm,
               MPI_Comm coll_comm);

  // ---- mpi_transport.cc: posting and polling
  Status check_usable(int peer, uint32_t channel) const;
  Status post_header(Handle handle, Op& op);
  Status post_chunks(Handle handle, Op& op, char* data, size_t bytes);
  void track(MPI_Request request, Handle handle, Part part, bool is_recv, size_t bytes);
  Status poll_once(bool* moved);
  void on_complete(const Slot& slot, const MPI_Status& status, bool status_has_error);
  void finish_header(Op& op);
  void compact_requests();

  // ---- mpi_native.cc: native collectives
  Status check_native_args(const NativeCollectiveArgs& args) const;
  // Posts what the native ops in native_queue_ are ready for, in queue order (see there).
  void advance_natives();
  Status post_header_gather(Handle handle, Op& op);
  Status check_gathered_headers(const NativeOp& native) const;
  Status post_native_collective(Handle handle, Op& op);
  Status post_allreduce_chunks(Handle handle, Op& op);
  void on_native_complete(const Slot& slot, Op& op, int mpi_error);
  void finish_native(Op& op);

  // ---- mpi_shutdown.cc: failure, abort and close
  // Fails the transport with `status` (the first failure wins) and every pending transfer;
  // with `tell_peers`, first sends every peer an abort message carrying it.
  void fail(const Status& status, bool tell_peers);
  void send_abort_messages(const Status& status);
  Status post_abort_receive();
  bool check_abort_receive();
  // Liveness (Transport::send_liveness): empty messages on the ping tag, one receive always
  // posted for them from any rank, like the abort receive; a ping is answered at most every
  // kLivenessAnswerMs. Pings count as no progress of any transfer.
  Status post_ping_receive();
  void check_ping_receive();
  void ping_peers();
  // The exit watch's verdict: a peer that died fails the transport (see the file comment).
  void check_exits();
  // Tests every outstanding request until all completed or `deadline`; true when all did.
  bool drain(Deadline deadline);
  void release(Deadline deadline);

  const int rank_;
  const int size_;
  const size_t chunk_bytes_;
  const int64_t native_max_elements_;
  const int max_channel_;  // largest channel whose two tags fit under MPI_TAG_UB
  const std::string who_;  // "rank 3", for messages
  MPI_Comm comm_;          // point-to-point messages
  MPI_Comm coll_comm_;     // native collectives and their header exchange
  // The reductions MPI computes as tidegate does, agreed by every rank (supports_native).
  ReductionSet agreeing_reductions_ = 0;

  mutable std::mutex mutex_;  // guards everything below and serialises our MPI calls
  TransferBook<Op> book_;     // the transfers and native ops, and receives waiting for headers
  std::vector<MPI_Request> requests_;  // parallel to slots_
  std::vector<Slot> slots_;
  std::deque<Handle> native_queue_;  // native ops in post order, until finished
  uint64_t messages_posted_ = 0;
  Status failed_;
  bool closed_ = false;
  bool abort_sent_ = false;
  MPI_Request abort_recv_ = MPI_REQUEST_NULL;
  std::array<char, kAbortMessageBytes> abort_in_{};
  std::string abort_out_;  // the abort message this rank sent; MPI reads it until sent
  std::vector<MPI_Request> abort_sends_;
  int ping_tag_ = 0;  // above every channel's tags
  MPI_Request ping_recv_ = MPI_REQUEST_NULL;
  char ping_in_ = 0;
  std::vector<MPI_Request> ping_sends_;
  Clock::time_point last_ping_sent_;
  std::vector<Clock::time_point> last_heard_;        // per peer: when a message last arrived
  std::unique_ptr<tcp::PacedExitWatch> exit_watch_;  // null with TIDEGATE_EXIT_WATCH=off
  std::atomic<bool> woken_{false};
};

}  // namespace mpi
}  // namespace tidegate
