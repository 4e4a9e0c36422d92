// The predicted native allreduce: one native collective that does a small allreduce's whole
// work and its identity check at once, for an op whose signature the engine predicted from the
// ops before it (engine/native_prediction.h says when and why that is safe).
//
// Every rank posts the same collective: the predicted shape (count + 1 elements of the
// predicted dtype, the predicted op), in a staging buffer of the task's own. A rank whose op is
// the predicted one contributes its input and a flag element meaning "mine"; any other rank (a
// decoy: its op differs, or its plan does not run this one natively) contributes zeros and the
// flag meaning "not mine". The flag element reduces with the same op as the data, so every rank
// learns the same verdict from it: all "mine", and the staging buffer holds the op's result,
// copied to the output (AVG divided there); otherwise nothing is written and the engine runs the
// op's planned phases (identity check, then its own algorithm), which name any mismatch.
//
// Flag values per op, exact in every dtype a native collective reduces (float32, float64, int32,
// int64, uint8): SUM (and AVG, posted as SUM): mine 0, not mine 1 (the sum is the number of
// decoys, below 256 for uint8, see kMaxRanksForUint8Flag); MAX: mine 0, not mine 1; MIN and PROD:
// mine 1, not mine 0. The result equals "mine" only when every rank sent "mine".
#pragma once

#include <cstdint>
#include <memory>

#include "base/types.h"
#include "collectives/task.h"

namespace tidegate {

// The op the engine expects next: a dense host allreduce of this signature, run natively on
// transport `transport_index` of the communicator.
struct NativePrediction {
  int transport_index = 0;
  int64_t count = 0;
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  tidegate_reduce_op_t reduce_op = TIDEGATE_SUM;

  bool operator==(const NativePrediction& other) const {
    return transport_index == other.transport_index && count == other.count &&
           dtype == other.dtype && reduce_op == other.reduce_op;
  }
};

// With 256 ranks or more a uint8 SUM (or AVG) of "not mine" flags could wrap to 0: no prediction
// there.
inline constexpr int kMaxRanksForUint8Flag = 255;

class PredictedNativeTask : public CollectiveTask {
 public:
  // `args`: this rank's op (its buffers are read only when it contributes).
  PredictedNativeTask(const TaskContext& context, const CollectiveArgs& args,
                      const NativePrediction& prediction);
  // A task destroyed while its collective is still with the transport (the communicator failed)
  // keeps its staging buffer until the process ends: MPI cannot cancel a collective and may
  // still write it.
  ~PredictedNativeTask() override;

  // Set before start(): whether this rank's op is the predicted one (same kind, count, dtype, op,
  // host memory, and its plan runs it natively on the predicted transport).
  void set_contributes(bool contributes) { contributes_ = contributes; }

  Status start() override;
  Status advance(bool* done) override;
  const char* algorithm() const override { return "predicted_native"; }
  // Once done: whether every rank contributed, so that the output holds the op's result and the
  // op's other phases must not run.
  bool completed_the_op() const override { return completed_; }

 private:
  TaskContext context_;
  CollectiveArgs args_;
  NativePrediction prediction_;
  size_t element_ = 0;
  // Sent (count + 1 elements: the data, the flag) and, after it, received (as many).
  std::unique_ptr<unsigned char[]> staging_;
  unsigned char* result_ = nullptr;  // the received part
  Transport::Handle handle_ = 0;
  bool contributes_ = false;
  bool posted_ = false;
  bool finished_ = false;
  bool completed_ = false;
};

}  // namespace tidegate
