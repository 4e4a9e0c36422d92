// The small toolkit every algorithm is written with:
//   - op_identity(): the header fields that name one collective on the wire;
//   - Messenger: posts this op's sends and receives with correctly filled headers, so that a
//     receiver always states what it expects and a disagreement between ranks fails at the
//     first message with check_wire_header()'s error (DESIGN.md "Every message has a header");
//   - TransferSet: a group of transfers that a step waits for together;
//   - RoundTask: a task made of rounds (post transfers, wait for all, do local work), which is
//     the shape of recursive doubling, Rabenseifner, dissemination and pairwise exchange;
//   - SequenceTask: runs subtasks one after the other (ring allreduce = reduce-scatter, then
//     allgather).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/transport.h"
#include "base/wire_header.h"
#include "collectives/collective_args.h"
#include "collectives/task.h"

namespace tidegate {

// comm_id, op_seq, op_kind, dtype, reduce_op, count and aux of the collective `args`, as every
// rank posting the same collective fills them. count is the op's defining count (allreduce,
// reduce_scatter: input count; allgather: per-rank count; allgatherv: the total, with a hash of
// the per-rank counts in aux; broadcast: the count, root in aux; barrier: 0; alltoallv: set per
// message). sender_rank, chunk and payload_bytes are filled per message.
WireHeader op_identity(const TaskContext& context, const CollectiveArgs& args);

// Elements -> bytes for one dtype, as the unsigned type the transport takes.
inline uint64_t payload_bytes(int64_t elements, size_t element_size) {
  return static_cast<uint64_t>(elements) * element_size;
}

class Messenger {
 public:
  Messenger(const TaskContext& context, const WireHeader& op) : context_(context), op_(op) {}

  // The header of message `chunk` from `sender` carrying `bytes` payload bytes.
  WireHeader header(int sender, uint64_t chunk, uint64_t bytes) const;

  // Posts a send of `bytes` at `data` to `peer` as message `chunk` of this op. `data` must stay
  // valid until the transfer is reported finished.
  Status send(int peer, uint64_t chunk, const void* data, uint64_t bytes,
              Transport::Handle* handle);
  // Posts a receive of message `chunk` of this op from `peer` into `data`, expecting exactly
  // `bytes` bytes (so a count mismatch fails before any byte lands).
  Status recv(int peer, uint64_t chunk, void* data, uint64_t bytes, Transport::Handle* handle);

  // Variable-length messages (sparse and compressed payloads, kWireFlagBoundedPayload): a send
  // carries its own length; a receive takes at most `bound` bytes into `data` and learns the
  // length from test(). A sender over the bound fails the receive (and the transport) with a
  // PROTOCOL error naming both lengths.
  Status send_bounded(int peer, uint64_t chunk, const void* data, uint64_t bytes,
                      Transport::Handle* handle);
  Status recv_bounded(int peer, uint64_t chunk, void* data, uint64_t bound,
                      Transport::Handle* handle);

  // As above with a header the caller adjusted (alltoallv carries per-pair counts).
  Status send_header(int peer, const WireHeader& header, const void* data,
                     Transport::Handle* handle);
  Status recv_header(int peer, const WireHeader& expected, void* data, Transport::Handle* handle);

  // Tests one transfer. A handle of 0 means nothing is pending and reads as done; a finished
  // transfer's handle is reset to 0, so testing it again is harmless. `payload_bytes` (may be
  // null) receives the finished transfer's length.
  Status test(Transport::Handle* handle, bool* done, size_t* payload_bytes = nullptr);

  const TaskContext& context() const { return context_; }
  const WireHeader& op() const { return op_; }
  int rank() const { return context_.rank; }
  int size() const { return context_.size; }

 private:
  TaskContext context_;
  WireHeader op_;
};

// Transfers that finish together: post them through add(), then poll test_all().
class TransferSet {
 public:
  // A fresh slot for one handle; pass it straight to Messenger::send/recv. The pointer is
  // valid until the next add().
  Transport::Handle* add() {
    handles_.push_back(0);
    return &handles_.back();
  }
  // Tests every pending transfer; *all_done once none is left (the set is then empty).
  Status test_all(Messenger& messenger, bool* all_done);
  bool empty() const { return handles_.empty(); }

 private:
  std::vector<Transport::Handle> handles_;
};

// A task made of rounds. Round r's transfers are posted by post_round(r) and, once all of
// them finished, finish_round(r) does the local work (reduce, copy) before round r+1 is
// posted. A round may post nothing (a rank that sits out).
class RoundTask : public CollectiveTask {
 public:
  RoundTask(const TaskContext& context, const WireHeader& op) : messenger_(context, op) {}

  Status start() override;
  Status advance(bool* done) override;

 protected:
  // Posts round `round`; sets *exists = false when the algorithm has no such round (finished).
  virtual Status post_round(int round, bool* exists) = 0;
  // Local work after every transfer of `round` finished.
  virtual Status finish_round(int round) = 0;

  Messenger& messenger() { return messenger_; }
  const Messenger& messenger() const { return messenger_; }
  TransferSet& transfers() { return transfers_; }

 private:
  Messenger messenger_;
  TransferSet transfers_;
  int round_ = 0;
  bool finished_ = false;
};

// Runs `steps` in order; each starts when the previous one is done.
class SequenceTask : public CollectiveTask {
 public:
  SequenceTask(const char* algorithm, std::vector<std::unique_ptr<CollectiveTask>> steps)
      : algorithm_(algorithm), steps_(std::move(steps)) {}

  Status start() override;
  Status advance(bool* done) override;
  const char* algorithm() const override { return algorithm_; }

 private:
  const char* algorithm_;
  std::vector<std::unique_ptr<CollectiveTask>> steps_;
  size_t current_ = 0;
};

// Copies `bytes` from src to dst unless they are the same memory (in-place calls).
void copy_unless_same(void* dst, const void* src, uint64_t bytes);

// Runs `task`, then `epilogue` (local work such as copying a result out of a scratch buffer)
// once, on the progress thread, before reporting done.
std::unique_ptr<CollectiveTask> with_epilogue(std::unique_ptr<CollectiveTask> task,
                                              std::function<void()> epilogue);

// Whether a reduce_scatter's output shares any byte with its input (a zero-length output
// counts when its address lies inside the input or at its end: the shape, not the length,
// decides, so that every rank of one call shape gets the same answer).
bool output_overlaps_input(const CollectiveArgs& args);

}  // namespace tidegate
