#include "transports/mpi/mpi_semantics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "numeric/reduce.h"
#include "transports/mpi/mpi_util.h"

namespace tidegate::mpi {

namespace {

// Lengths tried: a long one that takes the vector loops and a short odd one for the scalar
// head and tail code. Edge pairs repeat along each.
constexpr int kLengths[] = {4099, 7};

template <class T>
std::vector<T> edge_values() {
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    return {T(0),     -T(0),           T(1),          T(-1),          L::max(),       -L::max(),
            L::min(), L::denorm_min(), L::infinity(), -L::infinity(), L::quiet_NaN(), T(0.1),
            T(3)};
  } else {
    using L = std::numeric_limits<T>;
    return {T(0),
            T(1),
            T(-1),
            L::max(),
            L::min(),
            T(L::max() - 1),
            T(L::min() + 1),
            T(L::max() / 2 + 1),
            T(100),
            T(3)};
  }
}

// Every ordered pair of edge values, repeated to `length` elements: a[i] op b[i].
template <class T>
void edge_pairs(int length, std::vector<T>* a, std::vector<T>* b) {
  const std::vector<T> edges = edge_values<T>();
  const size_t n = edges.size();
  a->resize(static_cast<size_t>(length));
  b->resize(static_cast<size_t>(length));
  for (size_t i = 0; i < a->size(); ++i) {
    (*a)[i] = edges[(i / n) % n];
    (*b)[i] = edges[i % n];
  }
}

MPI_Datatype type_of(tidegate_dtype_t dtype) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return MPI_FLOAT;
    case TIDEGATE_FLOAT64:
      return MPI_DOUBLE;
    case TIDEGATE_INT32:
      return MPI_INT32_T;
    case TIDEGATE_INT64:
      return MPI_INT64_T;
    case TIDEGATE_UINT8:
      return MPI_UINT8_T;
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      break;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op op_of(tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return MPI_SUM;
    case TIDEGATE_PROD:
      return MPI_PROD;
    case TIDEGATE_MIN:
      return MPI_MIN;
    case TIDEGATE_MAX:
      return MPI_MAX;
  }
  return MPI_OP_NULL;
}

// MPI_Reduce_local(in, inout) computes inout = in op inout. Both operand orders are compared
// with tidegate's a op b: on these values tidegate's result does not depend on the order, and
// MPI's collectives may combine in either.
template <class T>
bool agrees(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  for (int length : kLengths) {
    std::vector<T> a, b;
    edge_pairs<T>(length, &a, &b);
    std::vector<T> ours(a.size());
    reduce(ours.data(), a.data(), b.data(), length, dtype, op);
    for (bool swapped : {false, true}) {
      std::vector<T> in = swapped ? b : a;
      std::vector<T> inout = swapped ? a : b;
      if (MPI_Reduce_local(in.data(), inout.data(), length, type_of(dtype), op_of(op)) !=
          MPI_SUCCESS) {
        return false;
      }
      if (std::memcmp(inout.data(), ours.data(), ours.size() * sizeof(T)) != 0) return false;
    }
  }
  return true;
}

bool agrees(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return agrees<float>(dtype, op);
    case TIDEGATE_FLOAT64:
      return agrees<double>(dtype, op);
    case TIDEGATE_INT32:
      return agrees<int32_t>(dtype, op);
    case TIDEGATE_INT64:
      return agrees<int64_t>(dtype, op);
    case TIDEGATE_UINT8:
      return agrees<uint8_t>(dtype, op);
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      break;
  }
  return false;
}

}  // namespace

ReductionSet measure_agreeing_reductions() {
  ReductionSet set = 0;
  for (tidegate_dtype_t dtype :
       {TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_INT32, TIDEGATE_INT64, TIDEGATE_UINT8}) {
    for (tidegate_reduce_op_t op : {TIDEGATE_SUM, TIDEGATE_PROD, TIDEGATE_MIN, TIDEGATE_MAX}) {
      if (agrees(dtype, op)) set |= reduction_bit(dtype, op);
    }
  }
  return set;
}

Status agree_on_reductions(MPI_Comm comm, ReductionSet local, ReductionSet* agreed) {
  static_assert(sizeof(ReductionSet) == sizeof(uint64_t));
  uint64_t in = local, out = 0;
  TG_RETURN_IF_ERROR(check_mpi(MPI_Allreduce(&in, &out, 1, MPI_UINT64_T, MPI_BAND, comm),
                               "MPI_Allreduce (agreeing on MPI's reduction semantics)"));
  *agreed = out;
  return Status::ok();
}

}  // namespace tidegate::mpi
