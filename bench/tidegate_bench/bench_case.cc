#include "bench/tidegate_bench/bench_case.h"

#include <algorithm>
#include <cstring>

#include "bench/tidegate_bench/element_io.h"

namespace tidegate::bench {

namespace {

const CollectiveTraits kTraits[] = {
    {"allreduce", true, true, true},   {"reduce_scatter", true, false, false},
    {"allgather", false, true, false}, {"allgatherv", false, true, false},
    {"broadcast", false, true, false}, {"alltoallv", false, false, false},
};

// A value that identifies (source, element) for the data-movement collectives; < 97, so exact
// in every dtype.
double tag_value(int64_t source, int64_t j) {
  return static_cast<double>((source * 31 + j * 7) % 97);
}

tidegate_tensor_t view(void* data, int64_t count, tidegate_dtype_t dtype) {
  return tidegate_host_tensor(count > 0 ? data : nullptr, count, dtype);
}

}  // namespace

const CollectiveTraits& traits(Collective collective) {
  return kTraits[static_cast<int>(collective)];
}

bool parse_collective(const std::string& name, Collective* collective) {
  for (int i = 0; i < static_cast<int>(std::size(kTraits)); ++i) {
    if (name == kTraits[i].name) {
      *collective = static_cast<Collective>(i);
      return true;
    }
  }
  return false;
}

double busbw_factor(Collective collective, int n) {
  switch (collective) {
    case Collective::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
    default:
      return static_cast<double>(n - 1) / n;
  }
}

BenchCase::BenchCase(Collective collective, tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                     int root, int rank, int size, int64_t bytes)
    : collective_(collective), dtype_(dtype), op_(op), root_(root), rank_(rank), size_(size) {
  const int64_t elem = static_cast<int64_t>(tidegate_dtype_size(dtype));
  count_ = bytes / elem;
  // Per-rank shares must be whole: round to a multiple of the world size where blocks are equal.
  const bool equal_blocks = collective == Collective::kReduceScatter ||
                            collective == Collective::kAllgather ||
                            collective == Collective::kAlltoallv;
  if (equal_blocks) count_ -= count_ % size;
  amplitude_ = static_cast<int>(std::clamp<int64_t>(exact_integer_limit(dtype) / size / 2, 1, 8));
  in_count_ = out_count_ = count_;
  counts_.assign(size, 0);
  offsets_.assign(size, 0);
  for (int r = 0; r < size; ++r) tidegate_block_range(count_, size, r, &offsets_[r], &counts_[r]);
  switch (collective) {
    case Collective::kReduceScatter:
      out_count_ = counts_[rank];
      break;
    case Collective::kAllgather:
    case Collective::kAllgatherv:
      in_count_ = counts_[rank];
      break;
    case Collective::kBroadcast:
      in_count_ = 0;
      break;  // in place on the output buffer
    default:
      break;
  }
  input_.resize(static_cast<size_t>(in_count_ * elem));
  output_.resize(static_cast<size_t>(out_count_ * elem));
}

int64_t BenchCase::bytes() const {
  return count_ * static_cast<int64_t>(tidegate_dtype_size(dtype_));
}

double BenchCase::input_value(int rank, int64_t i) const {
  if (op_ == TIDEGATE_PROD) {
    // One rank contributes 2 for each element, the others +-1: the product is +-2.
    if (i % size_ == rank) return 2;
    return (!dtype_is_unsigned(dtype_) && (i + rank) % 5 == 0) ? -1 : 1;
  }
  const int64_t span = dtype_is_unsigned(dtype_) ? amplitude_ + 1 : 2 * amplitude_ + 1;
  const int64_t v = (i * 7 + rank * 3) % span;
  return static_cast<double>(dtype_is_unsigned(dtype_) ? v : v - amplitude_);
}

double BenchCase::reduced_value(int64_t i) const {
  double acc = input_value(0, i);
  for (int r = 1; r < size_; ++r) {
    const double v = input_value(r, i);
    switch (op_) {
      case TIDEGATE_SUM:
      case TIDEGATE_AVG:
        acc += v;
        break;
      case TIDEGATE_PROD:
        acc *= v;
        break;
      case TIDEGATE_MIN:
        acc = std::min(acc, v);
        break;
      case TIDEGATE_MAX:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op_ != TIDEGATE_AVG || size_ == 1) return acc;
  // The library divides the exact sum once, in the dtype's own precision (16-bit floats in
  // float, then rounded) and integers truncating toward zero: do the same.
  switch (dtype_) {
    case TIDEGATE_FLOAT64:
      return acc / size_;
    case TIDEGATE_FLOAT32:
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      return static_cast<float>(acc) / static_cast<float>(size_);
    default:
      return static_cast<double>(static_cast<int64_t>(acc) / size_);
  }
}

double BenchCase::expected_value(int64_t i) const {
  switch (collective_) {
    case Collective::kAllreduce:
      return reduced_value(i);
    case Collective::kReduceScatter:
      return reduced_value(offsets_[rank_] + i);
    case Collective::kBroadcast:
      return tag_value(root_, i);
    case Collective::kAllgather:
    case Collective::kAllgatherv: {
      // Output element i came from the rank whose block contains it.
      int src = static_cast<int>(std::upper_bound(offsets_.begin(), offsets_.end(), i) -
                                 offsets_.begin()) -
                1;
      while (src > 0 && counts_[src] == 0) --src;
      return tag_value(src, i - offsets_[src]);
    }
    case Collective::kAlltoallv: {
      // Block p of the output came from rank p, which tagged it (sender p, receiver rank_).
      const int64_t block = counts_[0];
      const int p = static_cast<int>(i / block);
      return tag_value(static_cast<int64_t>(p) * size_ + rank_, i % block);
    }
  }
  return 0;
}

void BenchCase::fill() {
  for (int64_t i = 0; i < in_count_; ++i) {
    double v = 0;
    switch (collective_) {
      case Collective::kAllreduce:
      case Collective::kReduceScatter:
        v = input_value(rank_, i);
        break;
      case Collective::kAllgather:
      case Collective::kAllgatherv:
        v = tag_value(rank_, i);
        break;
      case Collective::kAlltoallv: {
        const int64_t block = counts_[0];
        v = tag_value(static_cast<int64_t>(rank_) * size_ + i / block, i % block);
        break;
      }
      case Collective::kBroadcast:
        break;
    }
    store_element(dtype_, input_.data(), i, v);
  }
  // Garbage in the output, so that an element the collective forgot to write is caught.
  std::memset(output_.data(), 0xA5, output_.size());
  if (collective_ == Collective::kBroadcast && rank_ == root_) {
    for (int64_t i = 0; i < out_count_; ++i)
      store_element(dtype_, output_.data(), i, tag_value(root_, i));
  }
}

void BenchCase::prepare_in_place() {
  if (collective_ == Collective::kAllreduce)
    std::memcpy(output_.data(), input_.data(), input_.size());
}

tidegate_status_t BenchCase::run(tidegate_comm_t comm, bool in_place) {
  tidegate_tensor_t in = view(in_place ? output() : input(), in_count_, dtype_);
  tidegate_tensor_t out = view(output(), out_count_, dtype_);
  switch (collective_) {
    case Collective::kAllreduce:
      return tidegate_allreduce(comm, &in, &out, op_);
    case Collective::kReduceScatter:
      return tidegate_reduce_scatter(comm, &in, &out, op_);
    case Collective::kAllgather:
      return tidegate_allgather(comm, &in, &out);
    case Collective::kAllgatherv:
      return tidegate_allgatherv(comm, &in, &out, counts_.data());
    case Collective::kBroadcast:
      return tidegate_broadcast(comm, &out, root_);
    case Collective::kAlltoallv:
      return tidegate_alltoallv(comm, &in, counts_.data(), offsets_.data(), &out, counts_.data(),
                                offsets_.data());
  }
  return TIDEGATE_ERR_INVALID_ARGUMENT;
}

int64_t BenchCase::count_wrong() const {
  const size_t elem = tidegate_dtype_size(dtype_);
  unsigned char expected[8];
  int64_t wrong = 0;
  for (int64_t i = 0; i < out_count_; ++i) {
    store_element(dtype_, expected, 0, expected_value(i));
    if (std::memcmp(expected, output_.data() + static_cast<size_t>(i) * elem, elem) != 0) ++wrong;
  }
  return wrong;
}

uint64_t BenchCase::output_hash() const { return fnv1a(output_.data(), output_.size()); }

}  // namespace tidegate::bench
