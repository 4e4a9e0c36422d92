// Binomial-tree broadcast, pipelined by segments.
//
// Ranks are renumbered relative to the root (v = (r - root) mod P). Rank v receives from its
// parent (v with its lowest set bit cleared) and sends to children v + 2^j for every 2^j below
// its lowest set bit (the root: below P), largest subtree first, so the tree is ceil(log2 P)
// deep. The tensor is cut into segments of at most TIDEGATE_SEGMENT_BYTES and each segment
// is forwarded as soon as it arrived: a large tensor streams down the tree instead of waiting
// at every level, which brings the cost close to one tensor transfer plus depth * segment.
//
// Every message carries the root in the header's aux field and the segment index in chunk,
// so ranks that disagree on the root or the count fail at their first message from the tree.
#include <algorithm>
#include <deque>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/task_kit.h"

namespace tidegate {

namespace {

constexpr int64_t kWindow = 8;  // segments in flight per link

class BinomialBroadcast : public CollectiveTask {
 public:
  BinomialBroadcast(const TaskContext& context, const CollectiveArgs& args)
      : messenger_(context, op_identity(context, args)), tensor_(args.output), root_(args.root) {
    const int size = context.size;
    const int relative = relative_rank(context.rank);
    int lowest = 1;  // lowest set bit of `relative`; for the root, beyond every child
    while (lowest < size && (relative & lowest) == 0) lowest <<= 1;
    if (relative != 0) parent_ = absolute(relative & (relative - 1));
    for (int mask = lowest >> 1; mask >= 1; mask >>= 1) {
      if (relative + mask < size) children_.push_back(absolute(relative + mask));
    }
    const int64_t per_segment = std::max<int64_t>(
        1, context.config->segment_bytes() / static_cast<int64_t>(tensor_.element_size()));
    segments_ =
        std::clamp<int64_t>((tensor_.count + per_segment - 1) / per_segment, 1, int64_t{1} << 30);
  }

  Status start() override { return post_receives(); }
  Status advance(bool* done) override;
  const char* algorithm() const override { return "binomial"; }

 private:
  int relative_rank(int rank) const {
    return (rank - root_ + messenger_.size()) % messenger_.size();
  }
  int absolute(int relative) const { return (relative + root_) % messenger_.size(); }
  void segment(int64_t k, char** data, uint64_t* bytes) const {
    int64_t offset = 0, length = 0;
    block_range(tensor_.count, static_cast<int>(segments_), static_cast<int>(k), &offset, &length);
    *data = tensor_.byte_data() + offset * static_cast<int64_t>(tensor_.element_size());
    *bytes = payload_bytes(length, tensor_.element_size());
  }

  Status post_receives();
  Status forward(int64_t k);
  Status try_forward(bool* processed);
  Status test_sends();

  Messenger messenger_;
  TensorView tensor_;
  int root_;
  int parent_ = -1;
  std::vector<int> children_;
  int64_t segments_ = 1;
  std::deque<Transport::Handle> receives_;  // segments [next_forward_, next_post_)
  int64_t next_post_ = 0;
  int64_t next_forward_ = 0;
  std::deque<Transport::Handle> sends_;
};

Status BinomialBroadcast::post_receives() {
  if (parent_ < 0) return Status::ok();
  while (next_post_ < segments_ && next_post_ - next_forward_ < kWindow) {
    char* data = nullptr;
    uint64_t bytes = 0;
    segment(next_post_, &data, &bytes);
    receives_.push_back(0);
    TG_RETURN_IF_ERROR(messenger_.recv(parent_, static_cast<uint64_t>(next_post_), data, bytes,
                                       &receives_.back()));
    ++next_post_;
  }
  return Status::ok();
}

Status BinomialBroadcast::forward(int64_t k) {
  char* data = nullptr;
  uint64_t bytes = 0;
  segment(k, &data, &bytes);
  for (int child : children_) {
    sends_.push_back(0);
    TG_RETURN_IF_ERROR(
        messenger_.send(child, static_cast<uint64_t>(k), data, bytes, &sends_.back()));
  }
  return Status::ok();
}

// The next segment in order goes to the children once it is here (the root has them all) and
// the window of unfinished sends leaves room.
Status BinomialBroadcast::try_forward(bool* processed) {
  *processed = false;
  if (next_forward_ >= segments_) return Status::ok();
  if (static_cast<int64_t>(sends_.size()) >= kWindow * static_cast<int64_t>(children_.size()) &&
      !children_.empty()) {
    return Status::ok();
  }
  if (parent_ >= 0) {
    bool arrived = false;
    TG_RETURN_IF_ERROR(messenger_.test(&receives_.front(), &arrived));
    if (!arrived) return Status::ok();
    receives_.pop_front();
  }
  TG_RETURN_IF_ERROR(forward(next_forward_));
  ++next_forward_;
  *processed = true;
  return Status::ok();
}

Status BinomialBroadcast::test_sends() {
  for (Transport::Handle& handle : sends_) {
    bool done = false;
    TG_RETURN_IF_ERROR(messenger_.test(&handle, &done));
  }
  while (!sends_.empty() && sends_.front() == 0) sends_.pop_front();
  return Status::ok();
}

Status BinomialBroadcast::advance(bool* done) {
  bool processed = true;
  while (processed) {
    TG_RETURN_IF_ERROR(test_sends());
    TG_RETURN_IF_ERROR(try_forward(&processed));
    TG_RETURN_IF_ERROR(post_receives());
  }
  *done = next_forward_ == segments_ && sends_.empty();
  return Status::ok();
}

}  // namespace

Status make_broadcast_binomial(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(args.root >= 0 && args.root < context.size, "broadcast: root out of range");
  TG_CHECK_ARG(args.output.count >= 0, "broadcast: negative count");
  *task = std::make_unique<BinomialBroadcast>(context, args);
  return Status::ok();
}

// ceil(log2 P) rounds, each forwarding the whole vector.
double broadcast_binomial_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::ceil_log2(p) * (t.alpha + n * t.beta);
}

}  // namespace tidegate
