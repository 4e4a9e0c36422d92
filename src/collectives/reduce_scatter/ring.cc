// Ring reduce-scatter, pipelined by segments.
//
// In step s (0 .. P-2) rank r sends block (r-s-1) to its right neighbour and receives block
// (r-s-2) from its left one; the received partial sum is combined with r's own input for that
// block and, unless the block is r's own (last step), sent on in step s+1. Each step is cut
// into segments, and segment k of step s+1 leaves as soon as segment k of step s is reduced,
// so reduction overlaps transfer. Message index m = s * segments + k numbers both the sends
// and the receives of a rank; its chunk field is chunk_base + m.
//
// Bitwise identity: each block's sum is computed once, along the ring, by a fixed chain of
// ranks (b+1, b+2, ..., b), and every rank later receives the owner's bytes.
//
// Deadlock freedom on a transport that completes a send only when the receiver matched it:
// receives land in a few slots that free up as soon as they are reduced, and no receive ever
// waits for a send of this rank with a higher message index, so waits cannot form a cycle.
#include "collectives/reduce_scatter/ring.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/task_kit.h"
#include "numeric/reduce.h"

namespace tidegate {

namespace {

constexpr int64_t kReceiveSlots = 4;  // receives in flight; enough to keep a link busy

class ReduceScatterRing : public CollectiveTask {
 public:
  ReduceScatterRing(const TaskContext& context, const WireHeader& op,
                    const ReduceScatterRingPlan& plan)
      : messenger_(context, op), plan_(plan), element_size_(dtype_size(plan.dtype)) {}

  Status start() override;
  Status advance(bool* done) override;
  const char* algorithm() const override { return "ring"; }

 private:
  struct PendingSend {
    int64_t index;
    Transport::Handle handle;
  };

  int rank() const { return messenger_.rank(); }
  int size() const { return messenger_.size(); }
  int64_t segments() const { return plan_.layout.segments; }
  char* slot(int64_t index) {
    return slots_.get() +
           (index % slot_count_) * plan_.layout.max_segment * static_cast<int64_t>(element_size_);
  }
  // The block that arrives (and is reduced) in `step`.
  int received_block(int64_t step) const { return ring_mod(rank() - step - 2, size()); }
  char* at(const void* base, int64_t elements) const {
    return static_cast<char*>(const_cast<void*>(base)) +
           elements * static_cast<int64_t>(element_size_);
  }

  Status post_send(int64_t index, const void* data, int64_t elements);
  Status post_receives();
  Status test_sends();
  Status try_process(bool* processed);
  char* partial_for(int64_t step, int block, int64_t k, int64_t offset, bool* ready);

  Messenger messenger_;
  ReduceScatterRingPlan plan_;
  size_t element_size_;
  int64_t total_ = 0;  // messages received (= messages sent) in this pass
  int64_t slot_count_ = 1;
  std::unique_ptr<char[]> slots_;
  std::unique_ptr<char[]> scratch_;          // two blocks of partials when plan_.partials is null
  int64_t scratch_block_ = 0;                // elements per scratch half
  std::vector<Transport::Handle> receives_;  // per slot
  int64_t next_post_ = 0;
  int64_t next_process_ = 0;
  std::deque<PendingSend> sends_;
  int64_t next_send_ = 0;
  int64_t sends_done_below_ = 0;  // every send with a smaller index has finished
};

Status ReduceScatterRing::start() {
  const RingLayout& layout = plan_.layout;
  const int64_t own_length = layout.block_length[rank()];
  if (size() == 1) {
    // One rank: the sum is the input (AVG divides by one, which changes nothing).
    copy_unless_same(plan_.own_output, plan_.input, payload_bytes(own_length, element_size_));
    return Status::ok();
  }
  total_ = static_cast<int64_t>(reduce_scatter_ring_messages(layout));
  slot_count_ = std::min(kReceiveSlots, total_);
  const int64_t slot_bytes = layout.max_segment * static_cast<int64_t>(element_size_);
  slots_ = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(slot_count_ * slot_bytes));
  receives_.assign(static_cast<size_t>(slot_count_), 0);
  if (plan_.partials == nullptr && size() > 2) {
    for (int64_t length : layout.block_length) scratch_block_ = std::max(scratch_block_, length);
    scratch_ = std::make_unique_for_overwrite<char[]>(
        static_cast<size_t>(2 * scratch_block_ * static_cast<int64_t>(element_size_)));
  }
  // Step 0 sends this rank's own input for block r-1: nothing to wait for.
  const int first_block = ring_mod(rank() - 1, size());
  for (int64_t k = 0; k < segments(); ++k) {
    int64_t offset = 0, length = 0;
    layout.segment(first_block, k, &offset, &length);
    TG_RETURN_IF_ERROR(post_send(k, at(plan_.input, offset), length));
  }
  TG_RETURN_IF_ERROR(post_receives());
  return Status::ok();
}

Status ReduceScatterRing::post_send(int64_t index, const void* data, int64_t elements) {
  const int right = ring_mod(rank() + 1, size());
  sends_.push_back({index, 0});
  TG_RETURN_IF_ERROR(messenger_.send(right, plan_.chunk_base + static_cast<uint64_t>(index), data,
                                     payload_bytes(elements, element_size_),
                                     &sends_.back().handle));
  next_send_ = index + 1;
  return Status::ok();
}

Status ReduceScatterRing::post_receives() {
  const int left = ring_mod(rank() - 1, size());
  while (next_post_ < total_ && next_post_ - next_process_ < slot_count_) {
    const int64_t step = next_post_ / segments();
    int64_t offset = 0, length = 0;
    plan_.layout.segment(received_block(step), next_post_ % segments(), &offset, &length);
    TG_RETURN_IF_ERROR(messenger_.recv(left, plan_.chunk_base + static_cast<uint64_t>(next_post_),
                                       slot(next_post_), payload_bytes(length, element_size_),
                                       &receives_[static_cast<size_t>(next_post_ % slot_count_)]));
    ++next_post_;
  }
  return Status::ok();
}

Status ReduceScatterRing::test_sends() {
  for (PendingSend& send : sends_) {
    bool done = false;
    TG_RETURN_IF_ERROR(messenger_.test(&send.handle, &done));
  }
  while (!sends_.empty() && sends_.front().handle == 0) sends_.pop_front();
  sends_done_below_ = sends_.empty() ? next_send_ : sends_.front().index;
  return Status::ok();
}

// Where the partial sum of segment k of `block` reduced in `step` goes. With the private
// scratch, halves alternate by step parity; before overwriting a half, the sends that read it
// in the previous step must have finished: those of segments up to k+1, since segment borders
// of blocks whose lengths differ by one element can shift by one element.
char* ReduceScatterRing::partial_for(int64_t step, int block, int64_t k, int64_t offset,
                                     bool* ready) {
  *ready = true;
  if (plan_.partials != nullptr) return at(plan_.partials, offset);
  if (step >= 2) {
    const int64_t last_reader = (step - 1) * segments() + std::min(k + 1, segments() - 1);
    *ready = sends_done_below_ > last_reader;
  }
  const int64_t inner = offset - plan_.layout.block_offset[block];
  return at(scratch_.get(), (step % 2) * scratch_block_ + inner);
}

Status ReduceScatterRing::try_process(bool* processed) {
  *processed = false;
  if (next_process_ >= total_) return Status::ok();
  const int64_t index = next_process_;
  bool arrived = false;
  TG_RETURN_IF_ERROR(
      messenger_.test(&receives_[static_cast<size_t>(index % slot_count_)], &arrived));
  if (!arrived) return Status::ok();

  const int64_t step = index / segments();
  const int block = received_block(step);
  const int64_t k = index % segments();
  int64_t offset = 0, length = 0;
  plan_.layout.segment(block, k, &offset, &length);
  // Canonical order: the partial of the ranks before this one in the block's chain first.
  if (step == size() - 2) {
    char* dst = at(plan_.own_output, offset - plan_.layout.block_offset[block]);
    reduce(dst, slot(index), at(plan_.input, offset), length, plan_.dtype, plan_.op);
    if (plan_.op == TIDEGATE_AVG) finalize_average(dst, length, plan_.dtype, size());
  } else {
    bool ready = false;
    char* dst = partial_for(step, block, k, offset, &ready);
    if (!ready) return Status::ok();
    reduce(dst, slot(index), at(plan_.input, offset), length, plan_.dtype, plan_.op);
    TG_RETURN_IF_ERROR(post_send(index + segments(), dst, length));
  }
  ++next_process_;
  *processed = true;
  return Status::ok();
}

Status ReduceScatterRing::advance(bool* done) {
  bool processed = true;
  while (processed) {
    TG_RETURN_IF_ERROR(test_sends());
    TG_RETURN_IF_ERROR(try_process(&processed));
    TG_RETURN_IF_ERROR(post_receives());
  }
  *done = next_process_ == total_ && sends_.empty();
  return Status::ok();
}

}  // namespace

std::unique_ptr<CollectiveTask> make_reduce_scatter_ring_task(const TaskContext& context,
                                                              const WireHeader& op,
                                                              const ReduceScatterRingPlan& plan) {
  return std::make_unique<ReduceScatterRing>(context, op, plan);
}

Status make_reduce_scatter_ring(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  ReduceScatterRingPlan plan;
  plan.input = args.input.data;
  plan.own_output = args.output.data;
  plan.dtype = args.input.dtype;
  plan.op = args.reduce_op;
  plan.layout = RingLayout::even(args.input.count, context.size, args.input.element_size(),
                                 context.config->segment_bytes());
  TG_CHECK_ARG(args.output.count == plan.layout.block_length[static_cast<size_t>(context.rank)],
               "reduce_scatter: output count must equal this rank's block length "
               "(tidegate_block_range)");
  // The ring reads this rank's own input block only in its last step, element by element into
  // the same element of the result, so an output that is exactly that block works in place.
  // Any other overlap (the output at the input's start, MPI_IN_PLACE's shape) would overwrite
  // input that is still to be sent: the result goes to a scratch block and is copied out.
  const char* own_block =
      args.input.byte_data() + plan.layout.block_offset[static_cast<size_t>(context.rank)] *
                                   static_cast<int64_t>(args.input.element_size());
  if (!output_overlaps_input(args) || args.output.data == own_block) {
    *task = make_reduce_scatter_ring_task(context, op_identity(context, args), plan);
    return Status::ok();
  }
  const size_t bytes = args.output.bytes();
  auto scratch = std::make_shared_for_overwrite<char[]>(std::max<size_t>(bytes, 1));
  plan.own_output = scratch.get();
  void* output = args.output.data;
  *task = with_epilogue(make_reduce_scatter_ring_task(context, op_identity(context, args), plan),
                        [scratch, output, bytes] { std::memcpy(output, scratch.get(), bytes); });
  return Status::ok();
}

double reduce_scatter_ring_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::ring_reduce_scatter(t, n, p);
}

}  // namespace tidegate
