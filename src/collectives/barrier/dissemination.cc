// Dissemination barrier (Hensgen, Finkel and Manber): in round k every rank sends an empty
// message to rank + 2^k and waits for the one from rank - 2^k. After ceil(log2 P) rounds every
// rank has heard, directly or through others, from every other rank, so none can leave
// before all have entered. Works for any P (no power-of-two fold needed); a single rank
// has no rounds and finishes at once.
//
// The messages are header-only (payload 0) but still checked: a rank that posted another
// collective in this slot fails at its first round with a mismatch naming the op kind.
#include <memory>

#include "collectives/algorithms.h"
#include "collectives/task_kit.h"

namespace tidegate {

namespace {

class DisseminationBarrier : public RoundTask {
 public:
  DisseminationBarrier(const TaskContext& context, const CollectiveArgs& args, const char* name)
      : RoundTask(context, op_identity(context, args)), name_(name) {}

  const char* algorithm() const override { return name_; }

 protected:
  Status post_round(int round, bool* exists) override {
    const int size = messenger().size();
    const int64_t distance = int64_t{1} << round;
    *exists = distance < size;
    if (!*exists) return Status::ok();
    const int rank = messenger().rank();
    const int to = static_cast<int>((rank + distance) % size);
    const int from = static_cast<int>((rank - distance % size + size) % size);
    const uint64_t chunk = static_cast<uint64_t>(round);
    TG_RETURN_IF_ERROR(messenger().recv(from, chunk, nullptr, 0, transfers().add()));
    TG_RETURN_IF_ERROR(messenger().send(to, chunk, nullptr, 0, transfers().add()));
    return Status::ok();
  }

  Status finish_round(int /*round*/) override { return Status::ok(); }

 private:
  const char* name_;
};

}  // namespace

Status make_barrier_dissemination(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task) {
  *task = std::make_unique<DisseminationBarrier>(context, args, "dissemination");
  return Status::ok();
}

// The same rounds carrying another op's header: every rank learns that every other rank posted
// the same op (kind, count, dtype, reduce op) before it runs on a path whose messages would not
// meet a differing rank's (another transport, a native collective).
Status make_identity_check(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task) {
  *task = std::make_unique<DisseminationBarrier>(context, args, "identity_check");
  return Status::ok();
}

// ceil(log2 P) rounds of empty messages.
double barrier_dissemination_cost_us(const CostTerms& t, double, int64_t p) {
  return cost::ceil_log2(p) * t.alpha;
}

double identity_check_cost_us(const CostTerms& t, double bytes, int64_t p) {
  return barrier_dissemination_cost_us(t, bytes, p);
}

}  // namespace tidegate
