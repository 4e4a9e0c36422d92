// One rank of the reduction-semantics cross-check under mpirun
// (proc.mpirun.<setup>.semantics.np<N>): for every dtype x op, on edge values (overflow, NaN, -0,
// infinities, the type's min and max), the native collectives (MPI's own, where the mpi transport
// offers them) and tidegate's own algorithms give bitwise-identical results, equal to the semantics
// tidegate.h documents (computed here by an independent scalar reference), identical on every rank.
//
// Each communicator is created with its own TIDEGATE_ALGO (read at creation), all over the mpi
// transport: native, ring, recursive_doubling and rabenseifner for allreduce; native and ring
// for reduce_scatter. Where MPI computes other values (Open MPI 4.1's vectorised uint8 sum
// saturates, its float min/max drop NaN), "native" must not be MPI's: the transport refuses it
// and the plan runs one of tidegate's own algorithms instead, so the results still agree.
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_values.h"

namespace {

using tidegate::testing::bf16_to_float;
using tidegate::testing::float_to_bf16;
using tidegate::testing::float_to_half;
using tidegate::testing::half_to_float;

const tidegate_dtype_t kDtypes[] = {TIDEGATE_FLOAT32,  TIDEGATE_FLOAT64, TIDEGATE_FLOAT16,
                                    TIDEGATE_BFLOAT16, TIDEGATE_INT32,   TIDEGATE_INT64,
                                    TIDEGATE_UINT8};
const tidegate_reduce_op_t kOps[] = {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN, TIDEGATE_MAX,
                                     TIDEGATE_PROD};
// Long enough for MPI's vector loops, odd for their tails.
constexpr int64_t kCount = 4099;

struct Algo {
  const char* name;
  const char* tidegate_algo;
  tidegate_comm_t comm = nullptr;
};

int g_rank = 0;
int g_size = 1;

int fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  return 1;
}

// ---- values: an element's value on a rank is a pattern of the element index, chosen so that
// the exact result does not depend on the order in which ranks are combined (sums of equal
// values that overflow at once, a single NaN or infinity, zeros of either sign, exact small
// sums). Integers wrap, so any values are order-independent there.

template <class T>
std::vector<T> float_edges() {
  using L = std::numeric_limits<T>;
  return {T(0),     -T(0),           T(1),          T(-1),          L::max(),       -L::max(),
          L::min(), L::denorm_min(), L::infinity(), -L::infinity(), L::quiet_NaN(), T(2)};
}

// Floats: pattern p of element i on rank r.
template <class T>
T float_value(int64_t i, int rank, tidegate_reduce_op_t op) {
  const std::vector<T> edges = float_edges<T>();
  const int64_t n = static_cast<int64_t>(edges.size());
  if (op == TIDEGATE_MIN || op == TIDEGATE_MAX) {
    return edges[static_cast<size_t>((i + rank * (i / n + 1)) % n)];  // any mix is fine
  }
  const int64_t pattern = i % 8;
  const T e = edges[static_cast<size_t>((i / 8) % n)];
  switch (pattern) {
    case 0:  // every rank the same edge value: overflow, underflow, NaN, inf, -0 alike
      return e;
    case 1:  // one rank contributes the edge value, the others 1 (prod) or 0 (sum)
      return rank == static_cast<int>(i % g_size) ? e : T(op == TIDEGATE_PROD ? 1 : 0);
    case 2:  // -0 on rank 0, +0 elsewhere
      return rank == 0 ? -T(0) : T(0);
    case 3:  // +inf on rank 0, -inf on the last rank (NaN when they meet), 0 elsewhere
      return rank == 0 ? std::numeric_limits<T>::infinity()
                       : (rank == g_size - 1 && g_size > 1 ? -std::numeric_limits<T>::infinity()
                                                           : T(op == TIDEGATE_PROD ? 1 : 0));
    case 4:  // NaN on the last rank only
      return rank == g_size - 1 ? std::numeric_limits<T>::quiet_NaN()
                                : T(op == TIDEGATE_PROD ? 2 : 1);
    case 5:  // the largest value everywhere: sums overflow to +inf at once
      return std::numeric_limits<T>::max();
    case 6:  // -0 everywhere
      return -T(0);
    default:  // small exact integers
      return T(1 + (rank + i) % 2);
  }
}

template <class T>
std::vector<T> int_edges() {
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
          T(129),
          T(128)};
}

template <class T>
T int_value(int64_t i, int rank) {
  const std::vector<T> edges = int_edges<T>();
  const int64_t n = static_cast<int64_t>(edges.size());
  return edges[static_cast<size_t>((i + rank * (i / n + 1)) % n)];
}

// ---- the documented semantics, element by element, in rank order

template <class T>
T float_combine(T a, T b, tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return a + b;
    case TIDEGATE_PROD:
      return a * b;
    case TIDEGATE_MIN:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return std::signbit(a) ? a : b;  // -0 below +0
      return b < a ? b : a;
    case TIDEGATE_MAX:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return std::signbit(a) ? b : a;
      return b > a ? b : a;
  }
  return a;
}

template <class T>
T int_combine(T a, T b, tidegate_reduce_op_t op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case TIDEGATE_PROD:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    case TIDEGATE_MIN:
      return b < a ? b : a;
    case TIDEGATE_MAX:
      return b > a ? b : a;
  }
  return a;
}

// Bytes of element i on `rank`, and the reference result, for any dtype.
void element(tidegate_dtype_t dtype, tidegate_reduce_op_t op, int64_t i, int rank,
             unsigned char* out) {
  switch (dtype) {
    case TIDEGATE_FLOAT32: {
      const float v = float_value<float>(i, rank, op);
      std::memcpy(out, &v, 4);
      break;
    }
    case TIDEGATE_FLOAT64: {
      const double v = float_value<double>(i, rank, op);
      std::memcpy(out, &v, 8);
      break;
    }
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16: {
      // float32 edge values, converted: the format's own max, inf, NaN and zeros follow.
      float v = float_value<float>(i, rank, op);
      if (std::isfinite(v) && std::abs(v) > 60000.0f) v = v > 0 ? 65504.0f : -65504.0f;
      if (v != 0 && std::abs(v) < 1e-3f) v = 0.0f;  // no subnormals in the test's converter
      const uint16_t bits = dtype == TIDEGATE_FLOAT16 ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(out, &bits, 2);
      break;
    }
    case TIDEGATE_INT32: {
      const int32_t v = int_value<int32_t>(i, rank);
      std::memcpy(out, &v, 4);
      break;
    }
    case TIDEGATE_INT64: {
      const int64_t v = int_value<int64_t>(i, rank);
      std::memcpy(out, &v, 8);
      break;
    }
    case TIDEGATE_UINT8:
      *out = static_cast<uint8_t>(int_value<int8_t>(i, rank));
      break;
  }
}

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The reference result of element i (every rank's value combined in rank order).
void reference(tidegate_dtype_t dtype, tidegate_reduce_op_t op, int64_t i, unsigned char* out) {
  const size_t width = tidegate_dtype_size(dtype);
  std::vector<unsigned char> value(width);
  element(dtype, op, i, 0, out);
  for (int r = 1; r < g_size; ++r) {
    element(dtype, op, i, r, value.data());
    switch (dtype) {
      case TIDEGATE_FLOAT32: {
        const float v = float_combine(load<float>(out), load<float>(value.data()), op);
        std::memcpy(out, &v, 4);
        break;
      }
      case TIDEGATE_FLOAT64: {
        const double v = float_combine(load<double>(out), load<double>(value.data()), op);
        std::memcpy(out, &v, 8);
        break;
      }
      case TIDEGATE_FLOAT16:
      case TIDEGATE_BFLOAT16: {
        const bool half = dtype == TIDEGATE_FLOAT16;
        auto widen = [half](uint16_t b) { return half ? half_to_float(b) : bf16_to_float(b); };
        const uint16_t a16 = load<uint16_t>(out), b16 = load<uint16_t>(value.data());
        const float a = widen(a16), b = widen(b16);
        uint16_t bits = 0;
        if (op == TIDEGATE_MIN || op == TIDEGATE_MAX) {
          // One operand's bits, unchanged: NaN first, -0 below +0.
          const bool is_min = op == TIDEGATE_MIN;
          if (std::isnan(a)) {
            bits = a16;
          } else if (std::isnan(b)) {
            bits = b16;
          } else if (a == b) {
            bits = std::signbit(b) == is_min ? b16 : a16;
          } else {
            bits = (is_min ? b < a : b > a) ? b16 : a16;
          }
        } else {
          const float v = float_combine(a, b, op);
          bits = half ? float_to_half(v) : float_to_bf16(v);
        }
        std::memcpy(out, &bits, 2);
        break;
      }
      case TIDEGATE_INT32: {
        const int32_t v = int_combine(load<int32_t>(out), load<int32_t>(value.data()), op);
        std::memcpy(out, &v, 4);
        break;
      }
      case TIDEGATE_INT64: {
        const int64_t v = int_combine(load<int64_t>(out), load<int64_t>(value.data()), op);
        std::memcpy(out, &v, 8);
        break;
      }
      case TIDEGATE_UINT8:
        *out = int_combine(*out, value[0], op);
        break;
    }
  }
  if (op != TIDEGATE_AVG || g_size == 1) return;
  switch (dtype) {  // AVG: the sum divided once
    case TIDEGATE_FLOAT32: {
      const float v = load<float>(out) / static_cast<float>(g_size);
      std::memcpy(out, &v, 4);
      break;
    }
    case TIDEGATE_FLOAT64: {
      const double v = load<double>(out) / static_cast<double>(g_size);
      std::memcpy(out, &v, 8);
      break;
    }
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16: {
      const bool half = dtype == TIDEGATE_FLOAT16;
      const uint16_t b = load<uint16_t>(out);
      const float v = (half ? half_to_float(b) : bf16_to_float(b)) / static_cast<float>(g_size);
      const uint16_t bits = half ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(out, &bits, 2);
      break;
    }
    case TIDEGATE_INT32: {
      const int32_t v = static_cast<int32_t>(load<int32_t>(out) / g_size);
      std::memcpy(out, &v, 4);
      break;
    }
    case TIDEGATE_INT64: {
      const int64_t v = load<int64_t>(out) / g_size;
      std::memcpy(out, &v, 8);
      break;
    }
    case TIDEGATE_UINT8:
      *out = static_cast<uint8_t>(*out / g_size);
      break;
  }
}

std::vector<unsigned char> inputs(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  const size_t width = tidegate_dtype_size(dtype);
  std::vector<unsigned char> bytes(static_cast<size_t>(kCount) * width);
  for (int64_t i = 0; i < kCount; ++i) element(dtype, op, i, g_rank, &bytes[i * width]);
  return bytes;
}

bool identical_everywhere(const std::vector<unsigned char>& bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ULL;
  uint64_t low = h, high = h;
  MPI_Allreduce(&h, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

std::string what(const char* collective, const Algo& algo, tidegate_dtype_t dtype,
                 tidegate_reduce_op_t op) {
  return std::string(collective) + " (" + algo.name + ") dtype " + std::to_string(dtype) + " op " +
         std::to_string(op);
}

// First differing element of `got` against the reference, described.
std::string first_difference(const std::vector<unsigned char>& got, tidegate_dtype_t dtype,
                             tidegate_reduce_op_t op, int64_t offset) {
  const size_t width = tidegate_dtype_size(dtype);
  std::vector<unsigned char> want(width);
  for (size_t k = 0; k < got.size() / width; ++k) {
    reference(dtype, op, offset + static_cast<int64_t>(k), want.data());
    if (std::memcmp(want.data(), &got[k * width], width) != 0) {
      std::string text = "element " + std::to_string(offset + static_cast<int64_t>(k)) + ": got";
      for (size_t b = 0; b < width; ++b) text += " " + std::to_string(got[k * width + b]);
      text += ", want";
      for (size_t b = 0; b < width; ++b) text += " " + std::to_string(want[b]);
      return text;
    }
  }
  return "";
}

constexpr int kRefused = -1;

// A forced "native" that the transport does not offer for this dtype x op (its semantics differ)
// fails with UNSUPPORTED on every rank: the refusal this test expects wherever MPI computes
// something else. Anything else is a failure.
int refused_or_failed(const Algo& algo, tidegate_status_t st, const std::string& name) {
  const std::string message = tidegate_last_error();
  if (std::strcmp(algo.name, "native") == 0 && st == TIDEGATE_ERR_UNSUPPORTED &&
      message.find("native") != std::string::npos) {
    return kRefused;
  }
  return fail(name + ": " + message);
}

// Whether MPI's own MPI_Allreduce computes the documented result on these values (printed for
// each refusal, to show why it was needed).
bool mpi_itself_agrees(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      type = MPI_FLOAT;
      break;
    case TIDEGATE_FLOAT64:
      type = MPI_DOUBLE;
      break;
    case TIDEGATE_INT32:
      type = MPI_INT32_T;
      break;
    case TIDEGATE_INT64:
      type = MPI_INT64_T;
      break;
    case TIDEGATE_UINT8:
      type = MPI_UINT8_T;
      break;
    default:
      return false;
  }
  MPI_Op mpi_op = op == TIDEGATE_PROD  ? MPI_PROD
                  : op == TIDEGATE_MIN ? MPI_MIN
                  : op == TIDEGATE_MAX ? MPI_MAX
                                       : MPI_SUM;
  if (op == TIDEGATE_AVG) op = TIDEGATE_SUM;
  std::vector<unsigned char> data = inputs(dtype, op), out(data.size());
  MPI_Allreduce(data.data(), out.data(), static_cast<int>(kCount), type, mpi_op, MPI_COMM_WORLD);
  int agrees = first_difference(out, dtype, op, 0).empty() ? 1 : 0, all = 0;
  MPI_Allreduce(&agrees, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

int check_allreduce(const Algo& algo, tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  std::vector<unsigned char> data = inputs(dtype, op);
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), kCount, dtype);
  const std::string name = what("allreduce", algo, dtype, op);
  if (const tidegate_status_t st = tidegate_allreduce(algo.comm, &t, &t, op); st != TIDEGATE_OK) {
    return refused_or_failed(algo, st, name);
  }
  const std::string difference = first_difference(data, dtype, op, 0);
  if (!difference.empty()) return fail(name + ": " + difference);
  if (!identical_everywhere(data)) return fail(name + ": results differ between ranks");
  return 0;
}

int check_reduce_scatter(const Algo& algo, tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  // A count divisible by the size, so that MPI's reduce_scatter_block runs (not the fallback).
  const int64_t count = (kCount / g_size) * g_size;
  std::vector<unsigned char> data = inputs(dtype, op);
  int64_t offset = 0, length = 0;
  tidegate_block_range(count, g_size, g_rank, &offset, &length);
  std::vector<unsigned char> out(static_cast<size_t>(length) * tidegate_dtype_size(dtype));
  tidegate_tensor_t in = tidegate_host_tensor(data.data(), count, dtype);
  tidegate_tensor_t to = tidegate_host_tensor(out.data(), length, dtype);
  const std::string name = what("reduce_scatter", algo, dtype, op);
  if (const tidegate_status_t st = tidegate_reduce_scatter(algo.comm, &in, &to, op);
      st != TIDEGATE_OK) {
    return refused_or_failed(algo, st, name);
  }
  const std::string difference = first_difference(out, dtype, op, offset);
  if (!difference.empty()) return fail(name + ": " + difference);
  return 0;
}

int create(Algo* algo) {
  MPI_Comm world = MPI_COMM_WORLD;
  setenv("TIDEGATE_ALGO", algo->tidegate_algo, 1);  // read when the communicator is created
  if (tidegate_comm_create_from_mpi(&world, &algo->comm) != TIDEGATE_OK) {
    return fail(std::string("creating the ") + algo->name +
                " communicator: " + tidegate_last_error());
  }
  // Every rank finishes creating before any posts: a rank that went on to a refused op would
  // otherwise fail a slower rank's creation with that refusal (tests/multirank/
  // creation_outcome.h), and the ranks would no longer agree where they are.
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

// A refusal failed the communicator on every rank: every rank builds a new one.
int after_refusal(Algo* algo, const char* collective, tidegate_dtype_t dtype,
                  tidegate_reduce_op_t op, int* refusals) {
  ++*refusals;
  const bool typed = dtype != TIDEGATE_FLOAT16 && dtype != TIDEGATE_BFLOAT16;
  const bool agrees = typed && mpi_itself_agrees(dtype, op);
  if (g_rank == 0) {
    std::printf("native %s of dtype %d op %d refused (%s)\n", collective, dtype, op,
                !typed   ? "MPI has no such type"
                : agrees ? "MPI's own MPI_Allreduce agrees on these values"
                         : "MPI's own MPI_Allreduce differs on these values");
  }
  tidegate_comm_destroy(algo->comm);
  algo->comm = nullptr;
  return create(algo);
}

int run(std::vector<Algo>& algos) {
  int checks = 0, refusals = 0;
  for (tidegate_dtype_t dtype : kDtypes) {
    for (tidegate_reduce_op_t op : kOps) {
      for (Algo& algo : algos) {
        int rc = check_allreduce(algo, dtype, op);
        if (rc == kRefused) rc = after_refusal(&algo, "allreduce", dtype, op, &refusals);
        if (rc != 0) return rc;
        ++checks;
        if (std::strstr(algo.tidegate_algo, "reduce_scatter=") != nullptr) {
          rc = check_reduce_scatter(algo, dtype, op);
          if (rc == kRefused) rc = after_refusal(&algo, "reduce_scatter", dtype, op, &refusals);
          if (rc != 0) return rc;
          ++checks;
        }
      }
    }
  }
  if (g_rank == 0) {
    std::printf(
        "%d reduction-semantics checks passed on %d ranks (%zu algorithm sets, %d native "
        "refusals)\n",
        checks, g_size, algos.size(), refusals);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  std::vector<Algo> algos = {
      {"native", "allreduce=native,reduce_scatter=native"},
      {"ring", "allreduce=ring,reduce_scatter=ring"},
      {"recursive_doubling", "allreduce=recursive_doubling"},
      {"rabenseifner", "allreduce=rabenseifner"},
  };
  int rc = 0;
  for (Algo& algo : algos) {
    if ((rc = create(&algo)) != 0) break;
  }
  if (rc == 0) rc = run(algos);
  for (Algo& algo : algos) {
    if (algo.comm != nullptr) tidegate_comm_destroy(algo.comm);
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
