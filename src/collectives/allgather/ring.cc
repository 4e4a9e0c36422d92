// Ring allgather and allgatherv, pipelined by segments.
//
// In step s (0 .. P-2) rank r sends block (r-s) to its right neighbour and receives block
// (r-s-1) from its left one, straight into the output (no copy). Segment k of a block is
// forwarded in step s+1 as soon as it arrived in step s, so a large block streams around the
// ring instead of waiting for whole-block hops. Message index m = s * segments + k; its chunk
// field is chunk_base + m.
//
// Receives are posted a bounded window ahead and never wait for a send, so the pass cannot
// deadlock on a transport that completes sends only when they are matched.
#include "collectives/allgather/ring.h"

#include <deque>

#include "collectives/algorithms.h"
#include "collectives/task_kit.h"

namespace tidegate {

namespace {

constexpr int64_t kReceiveWindow = 8;

class AllgatherRing : public CollectiveTask {
 public:
  AllgatherRing(const TaskContext& context, const WireHeader& op, const AllgatherRingPlan& plan)
      : messenger_(context, op), plan_(plan), element_size_(dtype_size(plan.dtype)) {}

  Status start() override;
  Status advance(bool* done) override;
  const char* algorithm() const override { return "ring"; }

 private:
  int rank() const { return messenger_.rank(); }
  int size() const { return messenger_.size(); }
  int64_t segments() const { return plan_.layout.segments; }
  char* output_at(int64_t elements) const {
    return static_cast<char*>(plan_.output) + elements * static_cast<int64_t>(element_size_);
  }
  // The block that arrives in `step`.
  int received_block(int64_t step) const { return ring_mod(rank() - step - 1, size()); }

  Status post_send(int64_t index, const void* data, int64_t elements);
  Status post_receives();
  Status test_sends();
  Status try_forward(bool* processed);

  Messenger messenger_;
  AllgatherRingPlan plan_;
  size_t element_size_;
  int64_t total_ = 0;
  std::deque<Transport::Handle> receives_;  // posted, not yet processed, in index order
  int64_t next_post_ = 0;
  int64_t next_process_ = 0;
  std::deque<Transport::Handle> sends_;
};

Status AllgatherRing::start() {
  const RingLayout& layout = plan_.layout;
  const int64_t own_offset = layout.block_offset[rank()];
  const int64_t own_length = layout.block_length[rank()];
  if (size() > 1) {
    total_ = static_cast<int64_t>(size() - 1) * segments();
    // Step 0 sends this rank's own block from wherever the caller keeps it.
    const char* own = static_cast<const char*>(plan_.own_input);
    for (int64_t k = 0; k < segments(); ++k) {
      int64_t offset = 0, length = 0;
      layout.segment(rank(), k, &offset, &length);
      TG_RETURN_IF_ERROR(
          post_send(k, own + (offset - own_offset) * static_cast<int64_t>(element_size_), length));
    }
    TG_RETURN_IF_ERROR(post_receives());
  }
  // The local copy runs while the first segments travel.
  copy_unless_same(output_at(own_offset), plan_.own_input,
                   payload_bytes(own_length, element_size_));
  return Status::ok();
}

Status AllgatherRing::post_send(int64_t index, const void* data, int64_t elements) {
  const int right = ring_mod(rank() + 1, size());
  sends_.push_back(0);
  TG_RETURN_IF_ERROR(messenger_.send(right, plan_.chunk_base + static_cast<uint64_t>(index), data,
                                     payload_bytes(elements, element_size_), &sends_.back()));
  return Status::ok();
}

Status AllgatherRing::post_receives() {
  const int left = ring_mod(rank() - 1, size());
  while (next_post_ < total_ && next_post_ - next_process_ < kReceiveWindow) {
    int64_t offset = 0, length = 0;
    plan_.layout.segment(received_block(next_post_ / segments()), next_post_ % segments(), &offset,
                         &length);
    receives_.push_back(0);
    TG_RETURN_IF_ERROR(messenger_.recv(left, plan_.chunk_base + static_cast<uint64_t>(next_post_),
                                       output_at(offset), payload_bytes(length, element_size_),
                                       &receives_.back()));
    ++next_post_;
  }
  return Status::ok();
}

Status AllgatherRing::test_sends() {
  for (Transport::Handle& handle : sends_) {
    bool done = false;
    TG_RETURN_IF_ERROR(messenger_.test(&handle, &done));
  }
  while (!sends_.empty() && sends_.front() == 0) sends_.pop_front();
  return Status::ok();
}

// Takes the next segment in order once it arrived and forwards it unless its block has gone
// all the way round (the last step).
Status AllgatherRing::try_forward(bool* processed) {
  *processed = false;
  if (receives_.empty()) return Status::ok();
  bool arrived = false;
  TG_RETURN_IF_ERROR(messenger_.test(&receives_.front(), &arrived));
  if (!arrived) return Status::ok();
  receives_.pop_front();
  const int64_t index = next_process_++;
  const int64_t step = index / segments();
  if (step < size() - 2) {
    int64_t offset = 0, length = 0;
    plan_.layout.segment(received_block(step), index % segments(), &offset, &length);
    TG_RETURN_IF_ERROR(post_send(index + segments(), output_at(offset), length));
  }
  *processed = true;
  return Status::ok();
}

Status AllgatherRing::advance(bool* done) {
  bool processed = true;
  while (processed) {
    TG_RETURN_IF_ERROR(try_forward(&processed));
    TG_RETURN_IF_ERROR(post_receives());
  }
  TG_RETURN_IF_ERROR(test_sends());
  *done = next_process_ == total_ && sends_.empty();
  return Status::ok();
}

// The allgather and allgatherv entry points: check the local arguments, build the layout.
Status validate_host(const CollectiveArgs& args) {
  TG_CHECK_ARG(args.input.dtype == args.output.dtype,
               "allgather: input and output must have the same dtype");
  TG_CHECK_ARG(args.input.count >= 0, "allgather: negative input count");
  return Status::ok();
}

std::unique_ptr<CollectiveTask> gather_task(const TaskContext& context, const CollectiveArgs& args,
                                            const std::vector<int64_t>& lengths) {
  AllgatherRingPlan plan;
  plan.own_input = args.input.data;
  plan.output = args.output.data;
  plan.dtype = args.input.dtype;
  plan.layout =
      RingLayout::from_lengths(lengths, args.input.element_size(), context.config->segment_bytes());
  return make_allgather_ring_task(context, op_identity(context, args), plan);
}

}  // namespace

std::unique_ptr<CollectiveTask> make_allgather_ring_task(const TaskContext& context,
                                                         const WireHeader& op,
                                                         const AllgatherRingPlan& plan) {
  return std::make_unique<AllgatherRing>(context, op, plan);
}

Status make_allgather_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_host(args));
  TG_CHECK_ARG(args.output.count == args.input.count * context.size,
               "allgather: output count must be size * input count");
  const std::vector<int64_t> lengths(static_cast<size_t>(context.size), args.input.count);
  *task = gather_task(context, args, lengths);
  return Status::ok();
}

Status make_allgatherv_ring(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_host(args));
  TG_CHECK_ARG(args.counts.size() == static_cast<size_t>(context.size),
               "allgatherv: counts must have one entry per rank");
  int64_t total = 0;
  for (int64_t count : args.counts) {
    TG_CHECK_ARG(count >= 0, "allgatherv: negative count");
    total += count;
  }
  TG_CHECK_ARG(args.input.count == args.counts[static_cast<size_t>(context.rank)],
               "allgatherv: input count must equal counts[rank]");
  TG_CHECK_ARG(args.output.count == total, "allgatherv: output count must equal the sum of counts");
  *task = gather_task(context, args, args.counts);
  return Status::ok();
}

double allgather_ring_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::ring_allgather(t, n, p);
}

// Uneven blocks are not modelled: the mean block stands for all.
double allgatherv_ring_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::ring_allgather(t, n, p);
}

}  // namespace tidegate
