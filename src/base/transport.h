// The transport interface (DESIGN.md "Transport"): the one seam between tidegate's algorithms
// and the wires. A transport moves messages (a WireHeader plus a payload) between the ranks of
// one communicator; it knows nothing about collectives. Implementations live in transports/.
//
// Threading: every method except wake() and abort() is called only from the communicator's
// progress thread, so implementations need no locks for their own state.
//
// Matching: messages from rank A to rank B on one channel are delivered in order: the k-th
// isend(A -> B, channel c) fills B's k-th irecv(from A, channel c). Channels let several
// collectives be in flight at once without their messages interleaving.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "base/types.h"
#include "base/wire_header.h"

namespace tidegate {

class Store;
class Secret;

// A transport's own dense collectives (MPI_Allreduce, ncclAllReduce, ...), offered to the
// planner as the algorithm "native" beside tidegate's own.
enum class NativeCollective { kAllreduce, kAllgather, kReduceScatter };

// One native collective. Counts are elements. allreduce: `count` in and out. allgather: `count`
// in per rank, size*count out (rank order). reduce_scatter: size*count in, `count` out (this
// rank's block, rank order). input may equal output (in place) only for allreduce.
struct NativeCollectiveArgs {
  NativeCollective kind = NativeCollective::kAllreduce;
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  tidegate_reduce_op_t reduce_op = TIDEGATE_SUM;
  tidegate_memory_t memory = TIDEGATE_MEMORY_HOST;
  void* stream = nullptr;  // cudaStream_t for device memory (nullptr = the transport's own)
  // Every rank's header was compared for this op before it was posted (the engine's identity
  // check), so a transport may skip its own header exchange. False: the transport checks.
  bool identity_checked = false;
};

// What a transport can do. The selector trusts these, so they must tell the truth.
struct TransportCapabilities {
  bool host_memory = true;
  bool cuda_memory = false;
  bool native_allreduce = false;  // offers its own dense allreduce (MPI, NCCL)
  bool native_allgather = false;
  bool native_reduce_scatter = false;
  // Independent FIFO channels (messages of different channels never block or reorder each
  // other): channels 0 .. channels-1 may carry concurrent ops. 0 = any uint32 channel. The
  // engine runs ops on a transport with fewer channels than its window one channel at a time.
  uint32_t channels = 0;
  // Receives may be posted ahead of the sends they causally follow (a receive of a later round
  // posted before this rank's send of an earlier one) without stalling the sends. Algorithms
  // post ahead where allowed so that a rendezvous transport's ready-to-receive notices leave
  // early instead of costing a round trip at every round. False where a transport holds its
  // sends back while a posted receive still waits for its header (nccl_transport.h).
  bool receives_ahead = true;
};

class Transport {
 public:
  // Identifies one posted send or receive until test() has reported it finished. 0 is never
  // a valid handle.
  using Handle = uint64_t;

  virtual ~Transport() = default;

  // Short lowercase name ("tcp", "mpi", "ucx", "nccl"), as used in TIDEGATE_TRANSPORT.
  virtual const char* name() const = 0;

  // What this transport supports; constant for its lifetime.
  virtual TransportCapabilities capabilities() const = 0;

  // Post a send of `header` followed by `bytes` bytes at `payload` to `peer` on `channel`.
  // The payload must stay valid and unchanged until test() reports the send finished. The
  // header is copied. Errors only for invalid arguments or a transport that already failed.
  virtual Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
                       size_t bytes, Handle* handle) = 0;

  // Post a receive of the next message from `peer` on `channel` into `payload` (capacity
  // `bytes`, at least expected.payload_bytes). When the message's header arrives it is compared
  // with `expected` by check_wire_header() before any payload byte is stored; a mismatch (which
  // includes a payload length different from expected.payload_bytes, or above it when
  // `expected` is bounded: kWireFlagBoundedPayload) fails this receive with that error, and the
  // transport then fails as a whole and tells its peers (the streams no longer pair).
  virtual Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload,
                       size_t bytes, Handle* handle) = 0;

  // Sets *done once the transfer has finished, and then, when `payload_bytes` is not null,
  // the payload length it moved (a receive: the length the sender's header announced, which a
  // bounded receive needs; a send: its own length). A finished transfer's error (mismatch,
  // peer failure, ...) is returned here; after reporting done the handle is released and must
  // not be tested again.
  virtual Status test(Handle handle, bool* done, size_t* payload_bytes) = 0;
  // The same without asking for the length.
  Status test(Handle handle, bool* done) { return test(handle, done, nullptr); }

  // Moves bytes: sends and receives what the sockets / queues allow and records completions.
  // Blocks at most `max_wait` waiting for an event when nothing can be done at once (0 = only
  // poll). Sets *activity when any byte moved or any transfer completed, which the engine uses
  // to restart its no-progress deadline. A returned error means the transport has failed as a
  // whole (e.g. a peer died); all its pending transfers fail too.
  virtual Status progress(Milliseconds max_wait, bool* activity) = 0;

  // Whether post_native() accepts this collective, dtype, op and memory kind (MPI has no
  // float16 type, NCCL has no BAND, ...). The planner only offers "native" where this is true.
  virtual bool supports_native(NativeCollective kind, tidegate_dtype_t dtype,
                               tidegate_reduce_op_t op, tidegate_memory_t memory) const {
    (void)kind;
    (void)dtype;
    (void)op;
    (void)memory;
    return false;
  }

  // Posts a native collective; completion is reported by test(*handle) like a transfer. Before
  // any data moves, every rank's `header` (the op's identity: kind, op_seq, dtype, count, op)
  // is compared across ranks with check_wire_header(), and a mismatch fails the handle with
  // that error on every rank (never a hang or a wrong sum). UNSUPPORTED when
  // supports_native() is false.
  virtual Status post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                             Handle* handle) {
    (void)header;
    (void)args;
    (void)handle;
    return unsupported(std::string(name()) + " offers no native collectives");
  }

  // The ranks that this transport's unfinished receives wait for, ascending and without
  // repeats. Diagnostics only (a deadline error names them); empty when unknown.
  virtual std::vector<int> awaited_peers() const { return {}; }

  // Liveness, which tells a stopped or hung rank from one that merely waits as well: a rank whose
  // collective has made no progress for a while sends a notice to every peer, outside the
  // matching of messages; a rank that receives one answers (at most every half second), even
  // when idle. A deadline error then names the ranks that gave no sign of life. Transports
  // without it return false from tracks_liveness() and the error names only awaited ranks.
  virtual bool tracks_liveness() const { return false; }
  // Sends the notice to every peer (progress thread; best effort).
  virtual void send_liveness() {}
  // When anything (a message, a notice) last arrived from `peer`; Clock::time_point() if never.
  virtual Clock::time_point last_heard(int peer) const {
    (void)peer;
    return Clock::time_point();
  }

  // Interrupts a blocking progress() from any thread. Thread-safe.
  virtual void wake() = 0;

  // Best-effort: tells every peer that this rank failed with `reason` (its code and message
  // are delivered), then fails every pending transfer. Peers then fail their pending and later
  // transfers with `reason`'s code and a message naming this rank. Thread-safe; idempotent.
  virtual void abort(const Status& reason) = 0;

  // Graceful shutdown once no transfer is pending: flushes and closes connections, waiting at
  // most until `deadline`.
  virtual Status close(Deadline deadline) = 0;
};

// Everything a transport needs to connect a communicator's ranks.
struct TransportContext {
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  const Config* config = nullptr;
  Store* store = nullptr;          // for exchanging addresses; keys are already comm-scoped
  const Secret* secret = nullptr;  // authenticates connections
  Deadline deadline = Deadline::after_ms(0);
  // Local address that peers can reach this rank at (the address of the route to the store),
  // or "" when unknown; transports use it when not told otherwise by their own config.
  std::string advertise_host;
  // The MPI communicator (an MPI_Comm*) the communicator was created over by
  // tidegate_comm_create_from_mpi, valid during creation only; nullptr otherwise. Only the
  // mpi transport reads it (core code never sees an MPI type).
  const void* mpi_comm = nullptr;
};

// Constructor of one transport kind (see transport_registry.h).
using TransportFactory = Status (*)(const TransportContext& context,
                                    std::unique_ptr<Transport>* transport);

}  // namespace tidegate
