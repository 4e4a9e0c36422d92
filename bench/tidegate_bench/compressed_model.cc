#include "bench/tidegate_bench/compressed_model.h"

#include <algorithm>
#include <cmath>

#include "collectives/compressed/block_reduce.h"
#include "collectives/compressed/compressed_kit.h"
#include "compress/powersgd.h"
#include "compress/randomk.h"

namespace tidegate::bench {

namespace {

// The encoding as `rank` made it: the CompressedOp fields that seeds depend on.
CompressedOp op_of(const ModelInputs& in, int rank) {
  CompressedOp op;
  op.codec = in.codec;
  op.key = in.key;
  op.step = in.step;
  op.job_seed = in.config->codec_seed();
  op.rank = rank;
  op.size = static_cast<int>(in.inputs->size());
  return op;
}

Status roundtrip(const Codec& codec, const float* x, int64_t n, uint64_t seed,
                 std::vector<float>* out) {
  const TensorView view = float_view(x, n);
  std::vector<uint8_t> payload(codec.max_payload_bytes(view));
  EncodeContext encode;
  encode.seed = seed;
  size_t written = 0;
  TG_RETURN_IF_ERROR(codec.encode(view, encode, payload.data(), payload.size(), &written));
  out->assign(static_cast<size_t>(n), 0.0f);
  return codec.decode(payload.data(), written, float_view(out->data(), n));
}

void divide(std::vector<float>* values, bool average, int ranks) {
  if (!average) return;
  for (float& v : *values) v /= static_cast<float>(ranks);
}

Status sum_of_decoded(const ModelInputs& in, std::vector<float>* result) {
  const auto& inputs = *in.inputs;
  const int64_t n = static_cast<int64_t>(inputs[0].size());
  result->assign(static_cast<size_t>(n), 0.0f);
  std::vector<float> decoded;
  for (size_t r = 0; r < inputs.size(); ++r) {
    const uint64_t seed = encoding_seed(op_of(in, static_cast<int>(r)), 0, true);
    TG_RETURN_IF_ERROR(roundtrip(*in.codec, inputs[r].data(), n, seed, &decoded));
    for (int64_t i = 0; i < n; ++i) (*result)[i] += decoded[i];
  }
  divide(result, in.average, static_cast<int>(inputs.size()));
  return Status::ok();
}

Status scatter_reduce_allgather(const ModelInputs& in, std::vector<float>* result) {
  const auto& inputs = *in.inputs;
  const int size = static_cast<int>(inputs.size());
  const int64_t n = static_cast<int64_t>(inputs[0].size());
  const int64_t segment = block_segment_elements(*in.config);
  result->assign(static_cast<size_t>(n), 0.0f);
  std::vector<float> part, decoded;
  for (int owner = 0; owner < size; ++owner) {
    int64_t offset = 0, length = 0;
    block_range(n, size, owner, &offset, &length);
    size_t s = 0;
    for (int64_t done = 0; done < length; done += segment, ++s) {
      const int64_t first = offset + done;
      const int64_t m = std::min(segment, length - done);
      std::vector<float> sum(static_cast<size_t>(m), 0.0f);
      for (int r = 0; r < size; ++r) {
        const float* x = inputs[r].data() + first;
        if (r == owner) {
          for (int64_t i = 0; i < m; ++i) sum[i] += x[i];
          continue;
        }
        const uint64_t seed = encoding_seed(op_of(in, r), block_sender_part(owner, s), true);
        TG_RETURN_IF_ERROR(roundtrip(*in.codec, x, m, seed, &part));
        for (int64_t i = 0; i < m; ++i) sum[i] += part[i];
      }
      divide(&sum, in.average, size);
      const uint64_t seed = encoding_seed(op_of(in, owner), block_owner_part(s), true);
      TG_RETURN_IF_ERROR(roundtrip(*in.codec, sum.data(), m, seed, &decoded));
      std::copy(decoded.begin(), decoded.end(), result->begin() + first);
    }
  }
  return Status::ok();
}

void majority_vote(const ModelInputs& in, std::vector<float>* result) {
  const auto& inputs = *in.inputs;
  const size_t n = inputs[0].size();
  result->assign(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    size_t negative = 0;
    for (const auto& x : inputs) negative += x[i] < 0 ? 1 : 0;
    const size_t voters = inputs.size();
    (*result)[i] = 2 * negative > voters ? -1.0f : 2 * negative < voters ? 1.0f : 0.0f;
  }
}

void shared_randomk(const ModelInputs& in, std::vector<float>* result) {
  const auto& inputs = *in.inputs;
  const auto& codec = static_cast<const RandomKCodec&>(*in.codec);
  const int64_t n = static_cast<int64_t>(inputs[0].size());
  const int64_t k = std::min(codec.k_for(n), n);
  const uint64_t seed = encoding_seed(op_of(in, 0), 0, false);
  result->assign(static_cast<size_t>(n), 0.0f);
  for (int64_t j = 0; j < k; ++j) {
    int64_t stratum = 1;
    const int64_t i = k < n ? randomk_index(seed, j, k, n, &stratum) : j;
    const float scale = codec.config().unbiased && k < n ? static_cast<float>(stratum) : 1.0f;
    float sum = 0;
    for (const auto& x : inputs) sum += x[i] * scale;
    (*result)[i] = sum;
  }
  divide(result, in.average, static_cast<int>(inputs.size()));
}

Status powersgd(const ModelInputs& in, std::vector<float>* result) {
  const auto& inputs = *in.inputs;
  const int size = static_cast<int>(inputs.size());
  const int64_t n = static_cast<int64_t>(inputs[0].size());
  const int wanted = static_cast<const PowerSgdCodec&>(*in.codec).config().rank;
  const int rank = in.rows > 0 ? powersgd_effective_rank(wanted, in.rows, in.cols) : 0;
  result->assign(static_cast<size_t>(n), 0.0f);
  if (rank == 0 || static_cast<int64_t>(rank) * (in.rows + in.cols) >= in.rows * in.cols) {
    for (const auto& x : inputs) {
      for (int64_t i = 0; i < n; ++i) (*result)[i] += x[i];
    }
    divide(result, in.average, size);
    return Status::ok();
  }
  PowerSgdState state;
  state.prepare(in.cols, rank, encoding_seed(op_of(in, 0), 0, false));
  std::vector<float> p(static_cast<size_t>(in.rows * rank), 0.0f), one(p.size());
  for (const auto& x : inputs) {
    powersgd_compute_p(x.data(), in.rows, in.cols, state.q(), rank, one.data());
    for (size_t i = 0; i < p.size(); ++i) p[i] += one[i];
  }
  powersgd_orthogonalize(p.data(), in.rows, rank);
  std::vector<float> q(static_cast<size_t>(in.cols * rank), 0.0f), part(q.size());
  for (const auto& x : inputs) {
    powersgd_compute_q(x.data(), in.rows, in.cols, p.data(), rank, part.data());
    for (size_t i = 0; i < q.size(); ++i) q[i] += part[i];
  }
  divide(&q, in.average, size);
  powersgd_reconstruct(p.data(), q.data(), in.rows, in.cols, rank, result->data(), false);
  return Status::ok();
}

}  // namespace

Status model_result(const ModelInputs& in, std::vector<float>* result, double* tolerance) {
  *tolerance = 0;
  const std::string& a = in.algorithm;
  if (a == "allgather" || a == "sparse_reduce_scatter") return sum_of_decoded(in, result);
  if (a == "sra") return scatter_reduce_allgather(in, result);
  if (a == "summable") {
    majority_vote(in, result);
    return Status::ok();
  }
  // The two below sum through a dense ring allreduce, in another order than the model's.
  *tolerance = 1e-4;
  if (a == "shared_randomk") {
    shared_randomk(in, result);
    return Status::ok();
  }
  if (a == "powersgd") {
    *tolerance = 5e-3;  // P is orthogonalised after a sum in another order
    return powersgd(in, result);
  }
  return unsupported("no model for algorithm " + a);
}

int64_t count_differences(const std::vector<float>& got, const std::vector<float>& want,
                          double tolerance) {
  if (got.size() != want.size()) return static_cast<int64_t>(std::max(got.size(), want.size()));
  double largest = 0;
  for (float v : want) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  const double allowed = tolerance * largest;
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (tolerance == 0) {
      wrong += got[i] == want[i] ? 0 : 1;
    } else {
      wrong += std::fabs(static_cast<double>(got[i]) - want[i]) <= allowed ? 0 : 1;
    }
  }
  return wrong;
}

}  // namespace tidegate::bench
