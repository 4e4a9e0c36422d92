// The pieces every compressed allreduce (one algorithm per file beside this one) is written with:
//  - CompressedOp: the op's codec, tensors and settings, checked once (check_compressed_op);
//  - seeds for stochastic codecs, a pure function of (job seed, tensor key, the key's step, the
//    encoding's place in the op and, where encodings should be independent, the rank);
//  - staging: a slice of the input as float32, compensated with the sender's residual;
//  - finishing: the float32 result into the output's dtype;
//  - Inbox / Outbox: variable-size payload messages (kWireFlagBoundedPayload) in flight.
//
// Results are identical on every rank because every value of the output is decoded from the
// same bytes by the same code on every rank, and sums are accumulated in float32 in rank order
// (never arrival order). Each value is rounded at most twice: by its sender's encoding and by
// its owner's re-encoding of the sum (DESIGN.md "Identical results").
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "collectives/collective_args.h"
#include "collectives/compressed/compression_state.h"
#include "collectives/task.h"
#include "collectives/task_kit.h"
#include "compress/codec.h"

namespace tidegate {

struct CompressedOp {
  const Codec* codec = nullptr;
  TensorView input;   // float32, float16 or bfloat16, host memory
  TensorView output;  // same count and dtype; may be input (in place)
  bool average = false;
  bool error_feedback = false;
  uint64_t key = 0;
  uint64_t step = 0;
  uint64_t job_seed = 0;
  int rank = 0;
  int size = 1;
  CompressionState* state = nullptr;

  int64_t count() const { return input.count; }
};

// Reads the op out of args and checks what every compressed algorithm needs: a codec, SUM or
// AVG, a float32/float16/bfloat16 host tensor, output like input, the communicator's state.
// INVALID_ARGUMENT / UNSUPPORTED naming what is wrong (the API checks the same before posting).
Status check_compressed_op(const TaskContext& context, const CollectiveArgs& args,
                           CompressedOp* op);

// EncodeContext::seed for one encoding of this op: `part` names the encoding's place (a block,
// a segment, a role); with per_rank the rank is mixed in too, so that ranks' stochastic
// roundings are independent; without it every rank draws the same (shared random-k indices,
// PowerSGD's first Q).
uint64_t encoding_seed(const CompressedOp& op, uint64_t part, bool per_rank);

// INVALID_ARGUMENT naming the first NaN or infinity of the input (its index in the tensor), or
// ok. Run before any residual changes, so that a refused input leaves every residual as it was.
Status check_finite_input(const CompressedOp& op);

// input[offset, offset + n) as float32, plus the sender's residual of the key there when error
// feedback is on (*residual then points at that residual slice, else nullptr): written into
// scratch (n floats) and *values points there; but a float32 input without error feedback is
// used where it lies (*values points into it: no copy).
Status load_compensated(const CompressedOp& op, int64_t offset, int64_t n, float* scratch,
                        const float** values, float** residual);

// The sender's encoding of a whole tensor (the allgather and sparse reduce-scatter): the codec's
// encode(), except that top-k reuses its threshold from the key's previous steps (re-sampled
// every TopKCodec::kReuseSteps steps, as Ok-Topk recomputes it), which changes the time, not the
// bytes.
Status encode_whole(const CompressedOp& op, const TensorView& compensated, uint64_t seed,
                    PooledBuffer* payload);

// The sender's encoding of a whole tensor with error feedback, for codecs that decode sparse
// (Codec::decodes_sparse: top-k, threshold): the compensated gradient, input + residual, is
// computed in one pass into the key's spare residual (CompressionState::spare_residual),
// encoded as encode_whole() does, decode_subtract() removes the sent entries from it (touching
// only those) and it becomes the key's residual. The same bits as load_compensated() + decode +
// update_residual(), with three passes over the tensor fewer. An input element that is not
// finite, or whose sum with its residual is not, is INVALID_ARGUMENT naming it, and an op that
// fails leaves the residual as it was.
Status encode_whole_sparse_feedback(const CompressedOp& op, uint64_t seed, PooledBuffer* payload);

// Encodes values[0, n) into *payload (a buffer of the codec's bound from the op's pool, its size
// set to the payload's); with a residual, decodes the payload into `scratch` (n floats) and
// updates the residual with what the encoding left out.
Status encode_slice(const CompressedOp& op, const float* values, int64_t n, uint64_t seed,
                    float* residual, float* scratch, PooledBuffer* payload);

// residual[i] = compensated[i] - sent[i]: what this encoding left out.
void update_residual(float* residual, const float* compensated, const float* sent, int64_t n);

// Writes result[0, n) (float32) into output[offset, offset + n) in the output's dtype.
void store_result(const CompressedOp& op, const float* result, int64_t offset, int64_t n);

// Where to decode output[offset, offset + n): the output itself when it is float32 (no copy),
// else `scratch` (n floats), which finish_result() then stores in the output's dtype.
float* result_slot(const CompressedOp& op, int64_t offset, float* scratch);
void finish_result(const CompressedOp& op, const float* slot, int64_t offset, int64_t n);

// The task of a dense float32 allreduce of buffer[0, n) (in place) that a compressed algorithm
// runs inside itself; sub_step (1, 2, ...) gives its messages their own identity. Built by the
// context's SubAllreduceFactory (the plan's choice), or the ring when it has none.
Status make_sub_allreduce(const TaskContext& context, const CollectiveArgs& parent, float* buffer,
                          int64_t n, tidegate_reduce_op_t op, int32_t sub_step,
                          std::unique_ptr<CollectiveTask>* task);

// A payload buffer sized for the codec's exact bound of an n-element float32 slice.
size_t payload_bound(const Codec& codec, int64_t n);
TensorView float_view(float* data, int64_t n);
TensorView float_view(const float* data, int64_t n);

// Sends of variable-size payloads; the buffers must stay alive until all_sent() reports done.
class Outbox {
 public:
  // Posts payload[0, bytes) to peer as message `chunk`.
  Status send(Messenger& messenger, int peer, uint64_t chunk, const uint8_t* payload, size_t bytes);
  // Tests every send; *done once none is pending.
  Status all_sent(Messenger& messenger, bool* done);
  // Payload bytes this rank has sent through this outbox (for tidegate_request_bytes_sent).
  uint64_t bytes() const { return bytes_; }

 private:
  TransferSet sends_;
  uint64_t bytes_ = 0;
};

// Receives of variable-size payloads, each into its own buffer of at most `bound` bytes.
class Inbox {
 public:
  struct Message {
    int peer = 0;
    uint64_t chunk = 0;
    PooledBuffer buffer;  // capacity: the bound
    size_t bytes = 0;     // length received
    Transport::Handle handle = 0;
    bool arrived = false;
    int tag = 0;  // the algorithm's own index for the message
  };

  explicit Inbox(BufferPool* pool) : pool_(pool) {}

  // Posts a receive of message `chunk` from peer, at most `bound` bytes; returns its index.
  Status receive(Messenger& messenger, int peer, uint64_t chunk, size_t bound, int tag,
                 size_t* index);
  // Tests the receives not yet arrived; appends the indexes of those that arrived now.
  Status poll(Messenger& messenger, std::vector<size_t>* arrived);
  Message& message(size_t index) { return messages_[index]; }
  size_t size() const { return messages_.size(); }
  bool all_arrived() const { return pending_ == 0; }

 private:
  BufferPool* pool_;
  std::deque<Message> messages_;  // a deque: posted buffers and handles never move
  std::vector<size_t> pending_list_;
  size_t pending_ = 0;
};

}  // namespace tidegate
