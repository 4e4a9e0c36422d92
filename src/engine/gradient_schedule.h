// The gradient session's scheduler: which collectives a step runs, in which order, decided only
// from information every rank holds alike, so every rank posts the same ops in the same order.
//
// The inputs are the registration (identical on every rank, checked at creation) and, once per
// negotiation round, the agreed readiness counts: for each gradient, how many ranks have marked
// it ready (the result of one allreduce, hence bitwise the same everywhere). A gradient joins the
// backlog in the round where its count reaches the number of ranks. next_batch() then cuts the
// backlog into ops by a deterministic rule:
//   - priority: the backlog is ordered by (priority, key) (or, for comparisons, by the round it
//     was agreed in and then backward order: what DDP's buckets do);
//   - fusion: dense gradients of at most fusion_bytes are packed into one op with others of the
//     same dtype, up to fusion_bytes; the op takes the place of its first (highest-priority)
//     member;
//   - chunking: a dense gradient larger than chunk_bytes is cut into pieces of chunk_bytes, and
//     only as many pieces as the batch allows are taken, so a high-priority gradient agreed in
//     a later round waits for at most the ops already posted;
//   - compressed gradients are one op each (a codec's buckets stay within its tensor).
// Since every rank applies the same counts to the same state with the same rule, every rank
// gets the same ops; local timing never enters (DESIGN.md, "Same order everywhere").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/types.h"

namespace tidegate {

struct SessionGradient {
  uint64_t key = 0;
  int64_t count = 0;
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  int priority = 0;
  bool compressed = false;  // one op, never fused or cut
  int64_t bytes() const { return count * static_cast<int64_t>(dtype_size(dtype)); }
};

// A contiguous range of one gradient.
struct SchedulePiece {
  size_t gradient = 0;  // index into the registration
  int64_t offset = 0;   // elements
  int64_t count = 0;
};

struct ScheduledOp {
  std::vector<SchedulePiece> pieces;  // several: a fused op, packed in this order
  int64_t bytes = 0;
  bool chunk = false;  // a piece of a gradient that was cut
  bool fused() const { return pieces.size() > 1; }
};

struct ScheduleKnobs {
  int64_t fusion_bytes = 0;  // <= 0: no fusion
  int64_t chunk_bytes = 0;   // <= 0: never cut
  int64_t batch_bytes = 0;   // how much one batch may hold (at least one op)
  bool by_priority = true;   // false: agreed order, then backward (reverse priority) order
};

class GradientSchedule {
 public:
  GradientSchedule(std::vector<SessionGradient> gradients, ScheduleKnobs knobs);

  // A new step: nothing agreed, nothing scheduled.
  void begin_step();
  // One negotiation round: ready_on[i] ranks (of `size`) have marked gradient i ready.
  void agree(const int32_t* ready_on, int size);
  // The next ops, in the order every rank posts them: up to the batch size (always at least one
  // op when the backlog is not empty), or the whole backlog when `all`.
  std::vector<ScheduledOp> next_batch(bool all);

  bool everything_agreed() const { return agreed_count_ == gradients_.size(); }
  bool backlog_empty() const { return backlog_.empty(); }
  size_t size() const { return gradients_.size(); }
  const SessionGradient& gradient(size_t i) const { return gradients_[i]; }
  const ScheduleKnobs& knobs() const { return knobs_; }

 private:
  struct Pending {
    size_t gradient;
    int64_t offset;  // elements already scheduled
    uint64_t round;  // negotiation round it was agreed in
  };
  bool before(const Pending& a, const Pending& b) const;
  bool fusable(const Pending& p) const;

  std::vector<SessionGradient> gradients_;
  ScheduleKnobs knobs_;
  std::vector<bool> agreed_;
  size_t agreed_count_ = 0;
  uint64_t round_ = 0;
  std::vector<Pending> backlog_;  // kept sorted by before()
};

}  // namespace tidegate
