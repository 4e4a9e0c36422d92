#include "compressed_reference.h"

#include <cmath>
#include <cstring>

namespace tidegate::testing {

Floats gradient(int rank, int64_t n, uint64_t step) {
  Floats x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = mix64((static_cast<uint64_t>(rank) << 48) ^ (step << 40) ^
                                static_cast<uint64_t>(i) ^ 0x6772616473ull);
    const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // [-1, 1)
    const unsigned kind = static_cast<unsigned>(bits & 31);
    double v = unit * 0.01;
    if (kind == 0) v = unit * 3.0;   // a few large entries
    if (kind == 1) v = 0.0;          // some exact zeros
    if (kind == 2) v = unit * 1e-5;  // some tiny ones
    x[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return x;
}

Bytes to_bytes(tidegate_dtype_t dtype, const Floats& values) {
  const size_t n = values.size();
  Bytes out(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    if (dtype == TIDEGATE_FLOAT32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h =
          dtype == TIDEGATE_FLOAT16 ? ref_float_to_half(values[i]) : ref_float_to_bf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

Floats from_bytes(tidegate_dtype_t dtype, const Bytes& bytes) {
  const size_t n = bytes.size() / dtype_size(dtype);
  Floats out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == TIDEGATE_FLOAT32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = dtype == TIDEGATE_FLOAT16 ? ref_half_to_float(h) : ref_bf16_to_float(h);
    }
  }
  return out;
}

Floats round_to(tidegate_dtype_t dtype, const Floats& values) {
  return from_bytes(dtype, to_bytes(dtype, values));
}

Floats roundtrip(const Codec& codec, const float* x, int64_t n) {
  TensorView in;
  in.data = const_cast<float*>(x);
  in.count = n;
  in.dtype = TIDEGATE_FLOAT32;
  std::vector<uint8_t> payload(codec.max_payload_bytes(in));
  size_t written = 0;
  Status st = codec.encode(in, EncodeContext{}, payload.data(), payload.size(), &written);
  Floats out(static_cast<size_t>(n));
  TensorView view = in;
  view.data = out.data();
  if (st.is_ok()) st = codec.decode(payload.data(), written, view);
  if (!st.is_ok()) std::fill(out.begin(), out.end(), NAN);  // the test's comparison reports it
  return out;
}

Floats sum_of_decoded(const Codec& codec, const std::vector<Floats>& inputs, bool average) {
  const int64_t n = static_cast<int64_t>(inputs.front().size());
  Floats sum(static_cast<size_t>(n), 0.0f);
  for (const Floats& x : inputs) {
    const Floats decoded = roundtrip(codec, x.data(), n);
    for (int64_t i = 0; i < n; ++i) sum[i] += decoded[i];
  }
  const float ranks = static_cast<float>(inputs.size());
  if (average) {
    for (float& v : sum) v /= ranks;
  }
  return sum;
}

Floats sra_result(const Codec& codec, const std::vector<Floats>& inputs, int64_t segment,
                  bool average) {
  const int size = static_cast<int>(inputs.size());
  const int64_t n = static_cast<int64_t>(inputs.front().size());
  Floats result(static_cast<size_t>(n));
  const float ranks = static_cast<float>(size);
  for (int owner = 0; owner < size; ++owner) {
    int64_t offset = 0, length = 0;
    block_range(n, size, owner, &offset, &length);
    for (int64_t done = 0; done < length; done += segment) {
      const int64_t first = offset + done;
      const int64_t m = std::min(segment, length - done);
      Floats sum(static_cast<size_t>(m), 0.0f);
      for (int r = 0; r < size; ++r) {
        const float* x = inputs[r].data() + first;
        const Floats part = r == owner ? Floats(x, x + m) : roundtrip(codec, x, m);
        for (int64_t i = 0; i < m; ++i) sum[i] += part[i];
      }
      if (average) {
        for (float& v : sum) v /= ranks;
      }
      const Floats decoded = roundtrip(codec, sum.data(), m);
      std::copy(decoded.begin(), decoded.end(), result.begin() + first);
    }
  }
  return result;
}

Floats majority_vote(const std::vector<Floats>& inputs) {
  const size_t n = inputs.front().size();
  Floats vote(n);
  for (size_t i = 0; i < n; ++i) {
    size_t negative = 0;
    for (const Floats& x : inputs) negative += x[i] < 0 ? 1 : 0;
    const size_t voters = inputs.size();
    vote[i] = 2 * negative > voters ? -1.0f : 2 * negative < voters ? 1.0f : 0.0f;
  }
  return vote;
}

std::vector<double> exact_sum(const std::vector<Floats>& inputs, bool average) {
  std::vector<double> sum(inputs.front().size(), 0.0);
  for (const Floats& x : inputs) {
    for (size_t i = 0; i < x.size(); ++i) sum[i] += x[i];
  }
  if (average) {
    for (double& v : sum) v /= static_cast<double>(inputs.size());
  }
  return sum;
}

double relative_l2(const Floats& got, const std::vector<double>& exact) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - exact[i];
    error += d * d;
    norm += exact[i] * exact[i];
  }
  if (norm == 0) return error == 0 ? 0 : INFINITY;
  return std::sqrt(error / norm);
}

}  // namespace tidegate::testing
