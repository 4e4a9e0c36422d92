#include "collectives/task_kit.h"

#include <cstring>

#include "compress/codec.h"

namespace tidegate {

namespace {

// FNV-1a over 64-bit words.
uint32_t fnv1a(std::initializer_list<uint64_t> words, uint32_t hash = 2166136261u) {
  for (uint64_t value : words) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= static_cast<uint32_t>(value & 0xffu);
      hash *= 16777619u;
      value >>= 8;
    }
  }
  return hash;
}

// The per-rank counts of an allgatherv: ranks that pass different count arrays with the same
// total still disagree on the header's aux field at the first message.
int32_t hash_counts(const std::vector<int64_t>& counts) {
  uint32_t hash = 2166136261u;
  for (int64_t count : counts) hash = fnv1a({static_cast<uint64_t>(count)}, hash);
  return static_cast<int32_t>(hash);
}

int32_t hash_text(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) hash = (hash ^ c) * 16777619u;
  return static_cast<int32_t>(hash);
}

// The element count that identifies the op (see op_identity in the header).
int64_t defining_count(const CollectiveArgs& args) {
  switch (args.kind) {
    case OpKind::kAllreduce:
    case OpKind::kReduceScatter:
    case OpKind::kAllgather:
      return args.input.count;
    case OpKind::kAllgatherv: {
      int64_t total = 0;
      for (int64_t count : args.counts) total += count;
      return total;
    }
    case OpKind::kBroadcast:
      return args.output.count;
    case OpKind::kBarrier:
    case OpKind::kAlltoallv:
    case OpKind::kInternal:
      return 0;
  }
  return 0;
}

}  // namespace

WireHeader op_identity(const TaskContext& context, const CollectiveArgs& args) {
  WireHeader h;
  h.comm_id = context.comm_id;
  h.op_seq = args.op_seq;
  h.op_kind = args.kind;
  h.count = defining_count(args);
  switch (args.kind) {
    case OpKind::kAllreduce:
    case OpKind::kReduceScatter:
      h.dtype = static_cast<uint8_t>(args.input.dtype);
      h.reduce_op = static_cast<uint8_t>(args.reduce_op);
      h.aux = args.sub_step;
      break;
    case OpKind::kBroadcast:
      h.dtype = static_cast<uint8_t>(args.output.dtype);
      h.aux = args.root;
      break;
    case OpKind::kAllgatherv:
      h.dtype = static_cast<uint8_t>(args.input.dtype);
      h.aux = hash_counts(args.counts);
      break;
    case OpKind::kAllgather:
    case OpKind::kAlltoallv:
      h.dtype = static_cast<uint8_t>(args.input.dtype);
      break;
    case OpKind::kBarrier:
    case OpKind::kInternal:
      break;
  }
  const CompressionArgs& compression = args.compression;
  if (compression.enabled()) {
    // Ranks must agree on the codec and its settings, the algorithm, the tensor key and its
    // step, and error feedback: each has its own field, so a disagreement is named.
    h.codec_id = static_cast<uint8_t>(compression.codec->id());
    // The job seed belongs to the settings: ranks drawing from different seeds would not
    // agree on shared draws (random-k's indices, PowerSGD's first Q).
    const uint64_t seed = context.config != nullptr ? context.config->codec_seed() : 0;
    h.codec_config_hash = compression.codec->config_hash() ^ fnv1a({seed});
    h.aux = hash_text(compression.algorithm);
  }
  if (compression.enabled() || compression.auto_codec) {
    h.key_hash = fnv1a({compression.key, compression.step});
    if (compression.error_feedback) h.flags |= kWireFlagErrorFeedback;
  }
  if (compression.auto_codec) {
    // The allow-list belongs to the settings too, whatever the plan picked (dense included):
    // ranks must allow the same codecs, or their plans could part.
    std::string allowed;
    for (const auto& codec : compression.allowed) allowed += codec->spec() + ";";
    h.codec_config_hash ^= static_cast<uint32_t>(hash_text(allowed));
  }
  return h;
}

WireHeader Messenger::header(int sender, uint64_t chunk, uint64_t bytes) const {
  WireHeader h = op_;
  h.sender_rank = static_cast<uint32_t>(sender);
  // Both sides number messages the same way, so truncation to 32 bits wraps identically.
  h.chunk = static_cast<uint32_t>(chunk);
  h.payload_bytes = bytes;
  return h;
}

Status Messenger::send(int peer, uint64_t chunk, const void* data, uint64_t bytes,
                       Transport::Handle* handle) {
  return send_header(peer, header(context_.rank, chunk, bytes), data, handle);
}

Status Messenger::recv(int peer, uint64_t chunk, void* data, uint64_t bytes,
                       Transport::Handle* handle) {
  return recv_header(peer, header(peer, chunk, bytes), data, handle);
}

Status Messenger::send_bounded(int peer, uint64_t chunk, const void* data, uint64_t bytes,
                               Transport::Handle* handle) {
  WireHeader h = header(context_.rank, chunk, bytes);
  h.flags |= kWireFlagBoundedPayload;
  return send_header(peer, h, data, handle);
}

Status Messenger::recv_bounded(int peer, uint64_t chunk, void* data, uint64_t bound,
                               Transport::Handle* handle) {
  WireHeader h = header(peer, chunk, bound);
  h.flags |= kWireFlagBoundedPayload;
  return recv_header(peer, h, data, handle);
}

Status Messenger::send_header(int peer, const WireHeader& h, const void* data,
                              Transport::Handle* handle) {
  if (context_.bytes_sent != nullptr) *context_.bytes_sent += h.payload_bytes;
  TG_RETURN_IF_ERROR(context_.transport->isend(peer, context_.channel, h, data,
                                               static_cast<size_t>(h.payload_bytes), handle));
  return Status::ok();
}

Status Messenger::recv_header(int peer, const WireHeader& expected, void* data,
                              Transport::Handle* handle) {
  TG_RETURN_IF_ERROR(context_.transport->irecv(
      peer, context_.channel, expected, data, static_cast<size_t>(expected.payload_bytes), handle));
  return Status::ok();
}

Status Messenger::test(Transport::Handle* handle, bool* done, size_t* payload_bytes) {
  if (*handle == 0) {
    *done = true;
    return Status::ok();
  }
  bool finished = false;
  TG_RETURN_IF_ERROR(context_.transport->test(*handle, &finished, payload_bytes));
  if (finished) *handle = 0;
  *done = finished;
  return Status::ok();
}

Status TransferSet::test_all(Messenger& messenger, bool* all_done) {
  bool all = true;
  for (Transport::Handle& handle : handles_) {
    bool done = false;
    TG_RETURN_IF_ERROR(messenger.test(&handle, &done));
    all = all && done;
  }
  if (all) handles_.clear();
  *all_done = all;
  return Status::ok();
}

Status RoundTask::start() {
  bool exists = false;
  TG_RETURN_IF_ERROR(post_round(0, &exists));
  finished_ = !exists;
  return Status::ok();
}

Status RoundTask::advance(bool* done) {
  // Rounds whose transfers are already complete (or that posted none) run back to back.
  while (!finished_) {
    bool all_done = false;
    TG_RETURN_IF_ERROR(transfers_.test_all(messenger_, &all_done));
    if (!all_done) break;
    TG_RETURN_IF_ERROR(finish_round(round_));
    ++round_;
    bool exists = false;
    TG_RETURN_IF_ERROR(post_round(round_, &exists));
    finished_ = !exists;
  }
  *done = finished_;
  return Status::ok();
}

Status SequenceTask::start() {
  if (steps_.empty()) return Status::ok();
  TG_RETURN_IF_ERROR(steps_[0]->start());
  return Status::ok();
}

Status SequenceTask::advance(bool* done) {
  while (current_ < steps_.size()) {
    bool step_done = false;
    TG_RETURN_IF_ERROR(steps_[current_]->advance(&step_done));
    if (!step_done) break;
    ++current_;
    if (current_ < steps_.size()) TG_RETURN_IF_ERROR(steps_[current_]->start());
  }
  *done = current_ == steps_.size();
  return Status::ok();
}

void copy_unless_same(void* dst, const void* src, uint64_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

namespace {

class EpilogueTask : public CollectiveTask {
 public:
  EpilogueTask(std::unique_ptr<CollectiveTask> task, std::function<void()> epilogue)
      : task_(std::move(task)), epilogue_(std::move(epilogue)) {}

  Status start() override { return task_->start(); }
  Status advance(bool* done) override {
    TG_RETURN_IF_ERROR(task_->advance(done));
    if (*done && epilogue_) {
      epilogue_();
      epilogue_ = nullptr;
    }
    return Status::ok();
  }
  const char* algorithm() const override { return task_->algorithm(); }
  bool has_local_work() const override { return task_->has_local_work(); }

 private:
  std::unique_ptr<CollectiveTask> task_;
  std::function<void()> epilogue_;
};

}  // namespace

std::unique_ptr<CollectiveTask> with_epilogue(std::unique_ptr<CollectiveTask> task,
                                              std::function<void()> epilogue) {
  return std::make_unique<EpilogueTask>(std::move(task), std::move(epilogue));
}

bool output_overlaps_input(const CollectiveArgs& args) {
  if (args.input.count == 0) return false;
  const uintptr_t in = reinterpret_cast<uintptr_t>(args.input.data);
  const uintptr_t in_end = in + args.input.bytes();
  const uintptr_t out = reinterpret_cast<uintptr_t>(args.output.data);
  if (args.output.count == 0) return out >= in && out <= in_end;
  return out < in_end && in < out + args.output.bytes();
}

}  // namespace tidegate
