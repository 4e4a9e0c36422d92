// Small vocabulary types shared by every layer: dtypes, reduce ops, collective kinds, tensor
// views and deadlines. Kept free of any transport or algorithm detail.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tidegate/tidegate.h"

namespace tidegate {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

// A point in time after which a wait gives up. Every blocking wait in tidegate takes one.
class Deadline {
 public:
  static Deadline after(Milliseconds timeout) { return Deadline(Clock::now() + timeout); }
  static Deadline after_ms(int64_t ms) { return after(Milliseconds(ms)); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  bool passed() const { return Clock::now() >= at_; }
  // Time left, clamped at zero.
  Milliseconds remaining() const {
    auto left = std::chrono::duration_cast<Milliseconds>(at_ - Clock::now());
    return left.count() < 0 ? Milliseconds(0) : left;
  }
  // Remaining time as a poll()/epoll_wait() timeout in ms (at least 0, at most INT32_MAX).
  int poll_timeout_ms() const;
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

// The collectives, as they appear in wire headers. Values are part of the wire format.
enum class OpKind : uint8_t {
  kAllreduce = 1,
  kReduceScatter = 2,
  kAllgather = 3,
  kAllgatherv = 4,
  kBroadcast = 5,
  kBarrier = 6,
  kAlltoallv = 7,
  kInternal = 8,  // probes and bootstrap traffic on the data transport
};

const char* op_kind_name(OpKind kind);
const char* dtype_name(tidegate_dtype_t dtype);
const char* reduce_op_name(tidegate_reduce_op_t op);
// 0 for an unknown dtype.
size_t dtype_size(tidegate_dtype_t dtype);
bool dtype_is_valid(int dtype);
bool reduce_op_is_valid(int op);

// An internal, validated tensor view (a tidegate_tensor_t whose fields were checked).
struct TensorView {
  void* data = nullptr;
  int64_t count = 0;
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  tidegate_memory_t memory = TIDEGATE_MEMORY_HOST;
  void* stream = nullptr;
  int64_t rows = 0;  // optional 2-D shape; 0 x 0 for 1-D
  int64_t cols = 0;

  size_t element_size() const { return dtype_size(dtype); }
  size_t bytes() const { return static_cast<size_t>(count) * element_size(); }
  char* byte_data() const { return static_cast<char*>(data); }
  // Sub-view of elements [offset, offset + n).
  TensorView slice(int64_t offset, int64_t n) const {
    TensorView v = *this;
    v.data = byte_data() + static_cast<size_t>(offset) * element_size();
    v.count = n;
    v.rows = v.cols = 0;
    return v;
  }
};

// Block of a count-N tensor owned by `rank` of `size` (first N % size ranks get one more).
void block_range(int64_t count, int size, int rank, int64_t* offset, int64_t* length);

}  // namespace tidegate
