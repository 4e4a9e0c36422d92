#include "collectives/allreduce/predicted_native.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "collectives/task_kit.h"
#include "numeric/reduce.h"

namespace tidegate {

namespace {

// The flag element's value for "mine" / "not mine" under `op` (see the header).
int flag_value(tidegate_reduce_op_t op, bool mine) {
  const bool one_means_mine = op == TIDEGATE_MIN || op == TIDEGATE_PROD;
  return (mine == one_means_mine) ? 1 : 0;
}

template <typename T>
void store_as(unsigned char* at, int value) {
  const T v = static_cast<T>(value);
  std::memcpy(at, &v, sizeof v);
}

void store_flag(unsigned char* at, tidegate_dtype_t dtype, int value) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return store_as<float>(at, value);
    case TIDEGATE_FLOAT64:
      return store_as<double>(at, value);
    case TIDEGATE_INT32:
      return store_as<int32_t>(at, value);
    case TIDEGATE_INT64:
      return store_as<int64_t>(at, value);
    case TIDEGATE_UINT8:
      return store_as<uint8_t>(at, value);
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      break;  // no native reduction in 16-bit floats: never predicted (native_prediction.cc)
  }
}

// Whether the reduced flag element equals `value` exactly.
bool flag_is(const unsigned char* at, tidegate_dtype_t dtype, int value) {
  unsigned char expected[8] = {};
  store_flag(expected, dtype, value);
  return std::memcmp(at, expected, dtype_size(dtype)) == 0;
}

// Staging buffers of collectives that were still with a transport when their task ended (the
// communicator failed): MPI cannot cancel a collective and may write the buffer until every rank
// has posted it, which after a failure may be never, even after the transport is gone. They are
// kept, reachable, until the process ends: at most 512 KiB (sent and received parts) per failed
// communicator.
void keep_until_exit(std::unique_ptr<unsigned char[]> buffer) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<unsigned char[]>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(buffer));
}

}  // namespace

PredictedNativeTask::PredictedNativeTask(const TaskContext& context, const CollectiveArgs& args,
                                         const NativePrediction& prediction)
    : context_(context),
      args_(args),
      prediction_(prediction),
      element_(dtype_size(prediction.dtype)) {}

PredictedNativeTask::~PredictedNativeTask() {
  if (posted_ && !finished_) keep_until_exit(std::move(staging_));
}

Status PredictedNativeTask::start() {
  const size_t data_bytes = static_cast<size_t>(prediction_.count) * element_;
  const size_t part = data_bytes + element_;  // the data and the flag element
  // Two parts, sent and received: MPI_IN_PLACE made Open MPI's MPI_Iallreduce slower at 64 KiB.
  staging_.reset(new unsigned char[2 * part]());  // zeros: a decoy's data
  if (contributes_) std::memcpy(staging_.get(), args_.input.data, data_bytes);
  store_flag(staging_.get() + data_bytes, prediction_.dtype,
             flag_value(prediction_.reduce_op, contributes_));
  result_ = staging_.get() + part;

  NativeCollectiveArgs native;
  native.kind = NativeCollective::kAllreduce;
  native.input = staging_.get();
  native.output = result_;
  native.count = prediction_.count + 1;
  native.dtype = prediction_.dtype;
  // AVG reduces as SUM; the division happens on the output, below, so the flag stays exact.
  native.reduce_op = prediction_.reduce_op == TIDEGATE_AVG ? TIDEGATE_SUM : prediction_.reduce_op;
  native.memory = TIDEGATE_MEMORY_HOST;
  native.identity_checked = true;  // the flag element is this op's identity check
  WireHeader header = op_identity(context_, args_);
  header.sender_rank = static_cast<uint32_t>(context_.rank);
  TG_RETURN_IF_ERROR(context_.transport->post_native(header, native, &handle_));
  posted_ = true;
  return Status::ok();
}

Status PredictedNativeTask::advance(bool* done) {
  *done = false;
  bool finished = false;
  TG_RETURN_IF_ERROR(context_.transport->test(handle_, &finished));
  if (!finished) return Status::ok();
  finished_ = true;
  *done = true;
  const size_t data_bytes = static_cast<size_t>(prediction_.count) * element_;
  const bool all_mine =
      flag_is(result_ + data_bytes, prediction_.dtype, flag_value(prediction_.reduce_op, true));
  // Every rank reads the same reduced flag, so every rank decides the same here.
  completed_ = all_mine;
  if (!completed_) return Status::ok();
  std::memcpy(args_.output.data, result_, data_bytes);
  if (prediction_.reduce_op == TIDEGATE_AVG) {
    finalize_average(args_.output.data, prediction_.count, prediction_.dtype, context_.size);
  }
  return Status::ok();
}

}  // namespace tidegate
