#include "collectives/compressed/compressed_kit.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "compress/float_io.h"
#include "compress/seeded_random.h"
#include "compress/topk.h"

namespace tidegate {

namespace {
std::string what(const CollectiveArgs& args) {
  return "compressed allreduce op #" + std::to_string(args.op_seq);
}
}  // namespace

Status check_compressed_op(const TaskContext& context, const CollectiveArgs& args,
                           CompressedOp* op) {
  const CompressionArgs& c = args.compression;
  TG_CHECK_ARG(c.enabled(), what(args) + ": no codec");
  TG_CHECK_ARG(context.compression != nullptr,
               what(args) + ": the communicator has no codec state");
  TG_CHECK_ARG(args.kind == OpKind::kAllreduce, what(args) + ": codecs apply to allreduce only");
  TG_CHECK_ARG(args.reduce_op == TIDEGATE_SUM || args.reduce_op == TIDEGATE_AVG,
               what(args) + ": reduce op " + reduce_op_name(args.reduce_op) +
                   " cannot be compressed (SUM and AVG can)");
  const tidegate_dtype_t dtype = args.input.dtype;
  TG_CHECK_ARG(dtype == TIDEGATE_FLOAT32 || dtype == TIDEGATE_FLOAT16 || dtype == TIDEGATE_BFLOAT16,
               what(args) + ": dtype " + dtype_name(dtype) +
                   " cannot be compressed (float32, float16 and bfloat16 can)");
  TG_CHECK_ARG(args.output.dtype == dtype && args.output.count == args.input.count,
               what(args) + ": output must have the input's dtype and count");
  if (args.input.memory != TIDEGATE_MEMORY_HOST || args.output.memory != TIDEGATE_MEMORY_HOST) {
    return unsupported(what(args) +
                       ": compressed allreduce runs on host memory only in this build");
  }
  TG_CHECK_ARG(args.input.count >= 0, what(args) + ": negative count");
  op->codec = c.codec.get();
  op->input = args.input;
  op->output = args.output;
  op->average = args.reduce_op == TIDEGATE_AVG;
  op->error_feedback = c.error_feedback;
  op->key = c.key;
  op->step = c.step;
  op->job_seed = context.config != nullptr ? context.config->codec_seed() : 0;
  op->rank = context.rank;
  op->size = context.size;
  op->state = context.compression;
  return Status::ok();
}

uint64_t encoding_seed(const CompressedOp& op, uint64_t part, bool per_rank) {
  uint64_t seed = mix64(op.job_seed ^ 0x7469646567617465ull);  // "tidegate"
  seed = mix64(seed ^ op.key);
  seed = mix64(seed ^ op.step);
  seed = mix64(seed ^ part);
  if (per_rank) seed = mix64(seed ^ (static_cast<uint64_t>(op.rank) + 1));
  return seed;
}

Status check_finite_input(const CompressedOp& op) {
  constexpr int64_t kBlock = 1 << 16;
  std::vector<float> scratch(op.input.dtype == TIDEGATE_FLOAT32 ? 0 : kBlock);
  for (int64_t first = 0; first < op.count(); first += kBlock) {
    const int64_t n = std::min(kBlock, op.count() - first);
    const float* x = floats_at(op.input, first, n, scratch.data());
    const int64_t bad = first_nonfinite(x, n);
    if (bad >= 0) {
      return invalid_argument(std::string("codec ") + op.codec->spec() + ": input element " +
                              std::to_string(first + bad) + " is " +
                              std::to_string(element_value(op.input, first + bad)) +
                              " (NaN or infinity cannot be compressed; residuals unchanged)");
    }
  }
  return Status::ok();
}

Status load_compensated(const CompressedOp& op, int64_t offset, int64_t n, float* scratch,
                        const float** values, float** residual) {
  *residual = nullptr;
  if (!op.error_feedback && op.input.dtype == TIDEGATE_FLOAT32) {
    *values = static_cast<const float*>(op.input.data) + offset;
    return Status::ok();
  }
  *values = scratch;
  float* all = nullptr;
  if (op.error_feedback) {
    TG_RETURN_IF_ERROR(op.state->sender().float_residual(op.key, op.count(), &all));
    *residual = all + offset;
  }
  if (*residual != nullptr && op.input.dtype == TIDEGATE_FLOAT32) {
    // input + residual in one pass (the same sum, bit for bit, as loading then adding)
    add_floats_into(static_cast<const float*>(op.input.data) + offset, *residual, n, scratch);
    return Status::ok();
  }
  load_floats(op.input, offset, n, scratch);
  if (*residual != nullptr) add_floats(*residual, n, scratch);
  return Status::ok();
}

Status encode_slice(const CompressedOp& op, const float* values, int64_t n, uint64_t seed,
                    float* residual, float* scratch, PooledBuffer* payload) {
  const size_t bound = payload_bound(*op.codec, n);
  *payload = op.state->buffers().take(bound);
  EncodeContext encode;
  encode.seed = seed;
  TG_RETURN_IF_ERROR(
      op.codec->encode(float_view(values, n), encode, payload->data(), bound, &payload->size));
  if (residual != nullptr) {
    TG_RETURN_IF_ERROR(op.codec->decode(payload->data(), payload->size, float_view(scratch, n)));
    update_residual(residual, values, scratch, n);
  }
  return Status::ok();
}

namespace {

// The key's remembered top-k threshold, forgotten every TopKCodec::kReuseSteps steps (the step
// then selects from a fresh sample).
TopKMemory& topk_memory(const CompressedOp& op) {
  TopKMemory& memory = op.state->topk(op.key);
  if (memory.reuses >= TopKCodec::kReuseSteps) memory = TopKMemory();
  return memory;
}

}  // namespace

Status encode_whole(const CompressedOp& op, const TensorView& compensated, uint64_t seed,
                    PooledBuffer* payload) {
  const size_t bound = op.codec->max_payload_bytes(compensated);
  *payload = op.state->buffers().take(bound);
  size_t written = 0;
  if (op.codec->id() == CodecId::kTopK) {
    TopKMemory& memory = topk_memory(op);
    TG_RETURN_IF_ERROR(static_cast<const TopKCodec&>(*op.codec).encode_reusing_threshold(
        compensated, &memory.threshold, payload->data(), bound, &written));
    ++memory.reuses;
  } else {
    EncodeContext encode;
    encode.seed = seed;
    TG_RETURN_IF_ERROR(op.codec->encode(compensated, encode, payload->data(), bound, &written));
  }
  payload->size = written;
  return Status::ok();
}

namespace {

// The error of a compensated tensor whose element `index` is not finite: the input element
// when it is NaN or infinite itself (the first such, named by check_finite_input), else the
// overflow of that element plus its residual.
Status compensation_error(const CompressedOp& op, const float* residual, int64_t index) {
  TG_RETURN_IF_ERROR(check_finite_input(op));
  return invalid_argument(
      std::string("codec ") + op.codec->spec() + ": input element " + std::to_string(index) + " (" +
      std::to_string(element_value(op.input, index)) + ") plus its error-feedback residual (" +
      std::to_string(residual != nullptr ? residual[index] : 0.0f) +
      ") overflows float32 (residuals unchanged)");
}

// next[i] = input[i] + residual[i] (the compensated gradient error feedback encodes), in one
// pass; a key without a residual yet adds +0.0, as a zero residual would (-0.0 + 0.0 is +0.0).
// INVALID_ARGUMENT naming the first element whose input or sum is not finite.
Status compensate_into(const CompressedOp& op, const float* residual, float* next) {
  constexpr int64_t kBlock = 1 << 16;
  std::vector<float> scratch(op.input.dtype == TIDEGATE_FLOAT32 ? 0 : kBlock);
  for (int64_t first = 0; first < op.count(); first += kBlock) {
    const int64_t n = std::min(kBlock, op.count() - first);
    const float* x = floats_at(op.input, first, n, scratch.data());
    float* out = next + first;
    if (residual != nullptr) {
      const float* r = residual + first;
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] + r[i];
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] + 0.0f;
    }
    const int64_t bad = first_nonfinite(out, n);
    if (bad >= 0) return compensation_error(op, residual, first + bad);
  }
  return Status::ok();
}

// Top-k with its threshold reused (every step but each TopKCodec::kReuseSteps-th): the
// compensation and the selection in one read of input and residual
// (TopKCodec::encode_sum_reusing_threshold) instead of a compensation pass, a selection pass over
// its result and a decode_subtract of the payload. *fused is false when it does not apply (the
// caller then takes the general path).
Status encode_topk_sum(const CompressedOp& op, const float* residual, float* next,
                       PooledBuffer* payload, bool* fused) {
  *fused = false;
  if (op.codec->id() != CodecId::kTopK || op.input.dtype != TIDEGATE_FLOAT32) return Status::ok();
  const auto& topk = static_cast<const TopKCodec&>(*op.codec);
  const int64_t n = op.count();
  TopKMemory& memory = topk_memory(op);
  if (!topk.encodes_sum_reusing_threshold(n, memory.threshold)) return Status::ok();
  *fused = true;
  const size_t bound = payload_bound(topk, n);
  *payload = op.state->buffers().take(bound);
  int64_t bad = -1;
  TG_RETURN_IF_ERROR(topk.encode_sum_reusing_threshold(
      static_cast<const float*>(op.input.data), residual, next, n, &memory.threshold,
      payload->data(), bound, &payload->size, &bad));
  if (bad >= 0) return compensation_error(op, residual, bad);
  ++memory.reuses;
  return Status::ok();
}

}  // namespace

Status encode_whole_sparse_feedback(const CompressedOp& op, uint64_t seed, PooledBuffer* payload) {
  TG_CHECK_INTERNAL(op.error_feedback && op.codec->decodes_sparse());
  const int64_t n = op.count();
  ResidualStore& store = op.state->sender();
  // A key's residual is made only by an op that succeeds: a refused first op leaves none (a
  // later flush then has nothing to add).
  float* residual = nullptr;
  if (store.has(op.key)) TG_RETURN_IF_ERROR(store.float_residual(op.key, n, &residual));
  std::vector<float>& next = op.state->spare_residual(op.key);
  next.resize(static_cast<size_t>(n));  // zero-filled once per key
  bool fused = false;
  TG_RETURN_IF_ERROR(encode_topk_sum(op, residual, next.data(), payload, &fused));
  if (!fused) {
    TG_RETURN_IF_ERROR(compensate_into(op, residual, next.data()));
    TG_RETURN_IF_ERROR(encode_whole(op, float_view(next.data(), n), seed, payload));
    TG_RETURN_IF_ERROR(
        op.codec->decode_subtract(payload->data(), payload->size, float_view(next.data(), n)));
  }
  // Only now, with the op's payload made, does the residual change.
  if (residual == nullptr) TG_RETURN_IF_ERROR(store.float_residual(op.key, n, &residual));
  return store.swap_float_residual(op.key, &next);
}

void update_residual(float* residual, const float* compensated, const float* sent, int64_t n) {
  for (int64_t i = 0; i < n; ++i) residual[i] = compensated[i] - sent[i];
}

void store_result(const CompressedOp& op, const float* result, int64_t offset, int64_t n) {
  store_floats(result, n, op.output, offset, false);
}

Status make_sub_allreduce(const TaskContext& context, const CollectiveArgs& parent, float* buffer,
                          int64_t n, tidegate_reduce_op_t op, int32_t sub_step,
                          std::unique_ptr<CollectiveTask>* task) {
  CollectiveArgs sub;
  sub.kind = OpKind::kAllreduce;
  sub.op_seq = parent.op_seq;
  sub.reduce_op = op;
  sub.input = sub.output = float_view(buffer, n);
  sub.sub_step = sub_step;
  if (context.sub_allreduce) return context.sub_allreduce(context, sub, task);
  return make_allreduce_ring(context, sub, task);
}

float* result_slot(const CompressedOp& op, int64_t offset, float* scratch) {
  return op.output.dtype == TIDEGATE_FLOAT32 ? static_cast<float*>(op.output.data) + offset
                                             : scratch;
}

void finish_result(const CompressedOp& op, const float* slot, int64_t offset, int64_t n) {
  if (op.output.dtype != TIDEGATE_FLOAT32) store_result(op, slot, offset, n);
}

size_t payload_bound(const Codec& codec, int64_t n) {
  TensorView like;
  like.count = n;
  like.dtype = TIDEGATE_FLOAT32;
  return codec.max_payload_bytes(like);
}

TensorView float_view(float* data, int64_t n) {
  TensorView v;
  v.data = data;
  v.count = n;
  v.dtype = TIDEGATE_FLOAT32;
  return v;
}

TensorView float_view(const float* data, int64_t n) {
  return float_view(const_cast<float*>(data), n);
}

Status Outbox::send(Messenger& messenger, int peer, uint64_t chunk, const uint8_t* payload,
                    size_t bytes) {
  TG_RETURN_IF_ERROR(messenger.send_bounded(peer, chunk, payload, bytes, sends_.add()));
  bytes_ += bytes;
  return Status::ok();
}

Status Outbox::all_sent(Messenger& messenger, bool* done) {
  return sends_.test_all(messenger, done);
}

Status Inbox::receive(Messenger& messenger, int peer, uint64_t chunk, size_t bound, int tag,
                      size_t* index) {
  Message message;
  message.peer = peer;
  message.chunk = chunk;
  message.tag = tag;
  message.buffer = pool_->take(bound);
  messages_.push_back(std::move(message));
  Message& posted = messages_.back();
  TG_RETURN_IF_ERROR(
      messenger.recv_bounded(peer, chunk, posted.buffer.data(), bound, &posted.handle));
  ++pending_;
  *index = messages_.size() - 1;
  pending_list_.push_back(*index);
  return Status::ok();
}

Status Inbox::poll(Messenger& messenger, std::vector<size_t>* arrived) {
  // Only the receives still pending are tested, in posting order (the order they usually
  // complete in); the list keeps that order as arrivals leave it.
  size_t kept = 0;
  for (size_t k = 0; k < pending_list_.size(); ++k) {
    const size_t i = pending_list_[k];
    Message& message = messages_[i];
    bool done = false;
    TG_RETURN_IF_ERROR(messenger.test(&message.handle, &done, &message.buffer.size));
    if (!done) {
      pending_list_[kept++] = i;
      continue;
    }
    message.bytes = message.buffer.size;
    message.arrived = true;
    --pending_;
    arrived->push_back(i);
  }
  pending_list_.resize(kept);
  return Status::ok();
}

}  // namespace tidegate
