#include "engine/gradient_schedule.h"

#include <algorithm>
#include <map>
#include <utility>

namespace tidegate {

GradientSchedule::GradientSchedule(std::vector<SessionGradient> gradients, ScheduleKnobs knobs)
    : gradients_(std::move(gradients)), knobs_(knobs), agreed_(gradients_.size(), false) {}

void GradientSchedule::begin_step() {
  std::fill(agreed_.begin(), agreed_.end(), false);
  agreed_count_ = 0;
  round_ = 0;
  backlog_.clear();
}

bool GradientSchedule::before(const Pending& a, const Pending& b) const {
  const SessionGradient& x = gradients_[a.gradient];
  const SessionGradient& y = gradients_[b.gradient];
  if (knobs_.by_priority) {
    if (x.priority != y.priority) return x.priority < y.priority;
    return x.key < y.key;
  }
  // DDP's order: as they became ready everywhere; within one round, backward order (the
  // gradients the next forward needs last were produced first).
  if (a.round != b.round) return a.round < b.round;
  if (x.priority != y.priority) return x.priority > y.priority;
  return x.key < y.key;
}

void GradientSchedule::agree(const int32_t* ready_on, int size) {
  ++round_;
  for (size_t i = 0; i < gradients_.size(); ++i) {
    if (agreed_[i] || ready_on[i] < size) continue;
    agreed_[i] = true;
    ++agreed_count_;
    const Pending pending{i, 0, round_};
    backlog_.insert(
        std::upper_bound(backlog_.begin(), backlog_.end(), pending,
                         [this](const Pending& a, const Pending& b) { return before(a, b); }),
        pending);
  }
}

bool GradientSchedule::fusable(const Pending& p) const {
  const SessionGradient& g = gradients_[p.gradient];
  return knobs_.fusion_bytes > 0 && !g.compressed && p.offset == 0 &&
         g.bytes() <= knobs_.fusion_bytes;
}

std::vector<ScheduledOp> GradientSchedule::next_batch(bool all) {
  std::vector<ScheduledOp> ops;
  std::map<tidegate_dtype_t, size_t> open_fusion;  // dtype -> index of its op still filling
  int64_t batch_bytes = 0;
  std::vector<Pending> left;
  size_t at = 0;
  for (; at < backlog_.size(); ++at) {
    if (!all && !ops.empty() && batch_bytes >= knobs_.batch_bytes) break;
    Pending p = backlog_[at];
    const SessionGradient& g = gradients_[p.gradient];
    const int64_t element = static_cast<int64_t>(dtype_size(g.dtype));
    if (fusable(p)) {
      auto open = open_fusion.find(g.dtype);
      if (open != open_fusion.end() && ops[open->second].bytes + g.bytes() > knobs_.fusion_bytes) {
        open_fusion.erase(open);  // full: the next one opens a new op
        open = open_fusion.end();
      }
      if (open == open_fusion.end()) {
        open = open_fusion.emplace(g.dtype, ops.size()).first;
        ops.emplace_back();
      }
      ScheduledOp& op = ops[open->second];
      op.pieces.push_back({p.gradient, 0, g.count});
      op.bytes += g.bytes();
      batch_bytes += g.bytes();
      continue;
    }
    const bool cut = !g.compressed && knobs_.chunk_bytes > 0 && g.bytes() > knobs_.chunk_bytes;
    if (!cut) {
      ScheduledOp op;
      op.pieces.push_back({p.gradient, 0, g.count});
      op.bytes = g.bytes();
      batch_bytes += op.bytes;
      ops.push_back(std::move(op));
      continue;
    }
    // Pieces of chunk_bytes (whole elements), as many as the batch takes.
    const int64_t per_piece = std::max<int64_t>(1, knobs_.chunk_bytes / element);
    while (p.offset < g.count && (all || ops.empty() || batch_bytes < knobs_.batch_bytes)) {
      ScheduledOp op;
      op.chunk = true;
      const int64_t n = std::min(per_piece, g.count - p.offset);
      op.pieces.push_back({p.gradient, p.offset, n});
      op.bytes = n * element;
      p.offset += n;
      batch_bytes += op.bytes;
      ops.push_back(std::move(op));
    }
    if (p.offset < g.count) {
      left.push_back(p);  // the rest waits for the next batch, still in its place
      ++at;
      break;
    }
  }
  left.insert(left.end(), backlog_.begin() + static_cast<std::ptrdiff_t>(at), backlog_.end());
  backlog_ = std::move(left);
  return ops;
}

}  // namespace tidegate
