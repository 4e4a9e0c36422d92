#include "engine/native_prediction.h"

namespace tidegate {

NativePredictor::NativePredictor(int world_size)
    : world_size_(world_size), repeats_(kMaxPeriod + 1, 0) {}

NativePredictor::Record NativePredictor::as_record(const CollectiveArgs& args,
                                                   const PlanDecision& decision) const {
  if (args.kind != OpKind::kAllreduce || args.replan_round || args.local_work) return std::nullopt;
  if (args.compression.enabled() || args.compression.auto_codec) return std::nullopt;
  if (decision.algorithm == nullptr || !decision.algorithm->native()) return std::nullopt;
  const TensorView& in = args.input;
  const TensorView& out = args.output;
  if (in.memory != TIDEGATE_MEMORY_HOST || out.memory != TIDEGATE_MEMORY_HOST) return std::nullopt;
  if (in.count <= 0 || in.count != out.count || in.dtype != out.dtype) return std::nullopt;
  if (in.bytes() > kMaxPredictedBytes) return std::nullopt;
  switch (in.dtype) {
    case TIDEGATE_FLOAT32:
    case TIDEGATE_FLOAT64:
    case TIDEGATE_INT32:
    case TIDEGATE_INT64:
      break;
    case TIDEGATE_UINT8:  // a SUM of "not mine" flags must not wrap to 0
      if ((args.reduce_op == TIDEGATE_SUM || args.reduce_op == TIDEGATE_AVG) &&
          world_size_ > kMaxRanksForUint8Flag) {
        return std::nullopt;
      }
      break;
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      return std::nullopt;  // no flag value is exact after every reduction there
  }
  NativePrediction prediction;
  prediction.transport_index = decision.transport_index;
  prediction.count = in.count;
  prediction.dtype = in.dtype;
  prediction.reduce_op = args.reduce_op;
  return prediction;
}

std::optional<NativePrediction> NativePredictor::next() const {
  for (size_t period = history_.size(); period >= 1; --period) {
    if (repeats_[period] >= period) return record(period);  // the largest L that repeats
  }
  return std::nullopt;
}

NativePredictor::Record NativePredictor::note_planned(const CollectiveArgs& args,
                                                      const PlanDecision& decision) {
  Record newest = as_record(args, decision);
  for (size_t period = 1; period <= kMaxPeriod; ++period) {
    const bool repeats = period <= history_.size() && newest == record(period);
    repeats_[period] = repeats ? repeats_[period] + 1 : 0;
  }
  history_.push_back(newest);
  if (history_.size() > kMaxPeriod) history_.pop_front();
  return newest;
}

}  // namespace tidegate
