#include "compress/sparse_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compress/bitpack.h"
#include "compress/sparse_payload.h"

namespace tidegate {
namespace {

// Floats per block: 32 KiB, so a block stays in the core's cache while every payload adds into
// it. A multiple of 8, so that a block starts at a byte of a bitmap.
constexpr int64_t kBlockFloats = 8192;

// Walks one payload's entries in index order, block by block.
class EntryCursor {
 public:
  explicit EntryCursor(const ParsedSparsePayload& p)
      : p_(p), reader_(p.where, packed_bytes(static_cast<uint64_t>(p.k), p.index_bits)) {
    if (p_.layout == SparseLayout::kIndices && p_.k > 0) next_ = reader_.get(p_.index_bits);
  }

  // Adds the entries whose index lies in [begin, end) into out (out[i] is element i). Blocks
  // come in ascending order and cover the tensor.
  void add_block(int64_t begin, int64_t end, float* out) {
    switch (p_.layout) {
      case SparseLayout::kIndices:
        while (taken_ < p_.k && static_cast<int64_t>(next_) < end) {
          out[next_] += value(taken_);
          if (++taken_ < p_.k) next_ = reader_.get(p_.index_bits);
        }
        return;
      case SparseLayout::kBitmap:
        for (int64_t byte = begin / 8; byte < (end + 7) / 8; ++byte) {
          for (unsigned bits = p_.where[byte]; bits != 0; bits &= bits - 1) {
            out[byte * 8 + std::countr_zero(bits)] += value(taken_++);
          }
        }
        return;
      case SparseLayout::kDense:
        for (int64_t i = begin; i < end; ++i) out[i] += value(i);
        return;
    }
  }

 private:
  float value(int64_t i) const {
    float v;
    std::memcpy(&v, p_.values + static_cast<size_t>(i) * sizeof(float), sizeof v);
    return v;
  }

  ParsedSparsePayload p_;
  BitReader reader_;
  uint64_t next_ = 0;
  int64_t taken_ = 0;
};

}  // namespace

Status sum_sparse_payloads(CodecId codec, uint8_t allowed_codec_flags, const PayloadSpan* payloads,
                           size_t n, const TensorView& output, float divisor, size_t* failed) {
  TG_RETURN_IF_ERROR(check_sparse_tensor(codec, output, "output"));
  TG_CHECK_ARG(output.dtype == TIDEGATE_FLOAT32, std::string(codec_name(codec)) +
                                                     " codec: a sum of payloads needs a float32 " +
                                                     "output, not " + dtype_name(output.dtype));
  std::vector<EntryCursor> cursors;
  cursors.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ParsedSparsePayload parsed;
    Status st = parse_sparse_payload(codec, allowed_codec_flags, payloads[i].data,
                                     payloads[i].bytes, output.count, &parsed);
    if (!st.is_ok()) {
      *failed = i;
      return st;
    }
    cursors.emplace_back(parsed);
  }
  // x / d and x * (1 / d) are the same correctly rounded number when d is a power of two (1 / d
  // is then exact), and multiplying is the cheaper; any other divisor divides.
  int exponent = 0;
  const bool power_of_two = std::frexp(divisor, &exponent) == 0.5f;
  const float reciprocal = 1.0f / divisor;
  float* out = static_cast<float*>(output.data);
  for (int64_t begin = 0; begin < output.count; begin += kBlockFloats) {
    const int64_t end = std::min(output.count, begin + kBlockFloats);
    std::fill(out + begin, out + end, 0.0f);
    for (EntryCursor& cursor : cursors) cursor.add_block(begin, end, out);
    if (divisor == 1.0f) continue;
    if (power_of_two) {
      for (int64_t i = begin; i < end; ++i) out[i] *= reciprocal;
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] /= divisor;
    }
  }
  return Status::ok();
}

}  // namespace tidegate
