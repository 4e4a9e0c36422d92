#include "base/types.h"

#include <climits>

namespace tidegate {

int Deadline::poll_timeout_ms() const {
  int64_t ms = remaining().count();
  if (ms > INT_MAX) return INT_MAX;
  return static_cast<int>(ms);
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllgather:
      return "allgather";
    case OpKind::kAllgatherv:
      return "allgatherv";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kAlltoallv:
      return "alltoallv";
    case OpKind::kInternal:
      return "internal";
  }
  return "unknown-op";
}

const char* dtype_name(tidegate_dtype_t dtype) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return "float32";
    case TIDEGATE_FLOAT64:
      return "float64";
    case TIDEGATE_FLOAT16:
      return "float16";
    case TIDEGATE_BFLOAT16:
      return "bfloat16";
    case TIDEGATE_INT32:
      return "int32";
    case TIDEGATE_INT64:
      return "int64";
    case TIDEGATE_UINT8:
      return "uint8";
  }
  return "unknown-dtype";
}

const char* reduce_op_name(tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_SUM:
      return "sum";
    case TIDEGATE_AVG:
      return "avg";
    case TIDEGATE_MIN:
      return "min";
    case TIDEGATE_MAX:
      return "max";
    case TIDEGATE_PROD:
      return "prod";
  }
  return "unknown-op";
}

size_t dtype_size(tidegate_dtype_t dtype) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
    case TIDEGATE_INT32:
      return 4;
    case TIDEGATE_FLOAT64:
    case TIDEGATE_INT64:
      return 8;
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      return 2;
    case TIDEGATE_UINT8:
      return 1;
  }
  return 0;
}

bool dtype_is_valid(int dtype) { return dtype >= TIDEGATE_FLOAT32 && dtype <= TIDEGATE_UINT8; }
bool reduce_op_is_valid(int op) { return op >= TIDEGATE_SUM && op <= TIDEGATE_PROD; }

void block_range(int64_t count, int size, int rank, int64_t* offset, int64_t* length) {
  const int64_t base = count / size;
  const int64_t extra = count % size;
  *length = base + (rank < extra ? 1 : 0);
  *offset = base * rank + (rank < extra ? rank : extra);
}

}  // namespace tidegate
