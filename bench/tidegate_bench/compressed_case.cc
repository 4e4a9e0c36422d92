#include "bench/tidegate_bench/compressed_case.h"

#include <cmath>
#include <cstring>

#include "bench/tidegate_bench/compressed_model.h"
#include "bench/tidegate_bench/element_io.h"
#include "bench/tidegate_bench/timing.h"
#include "collectives/algorithm_table.h"
#include "compress/float_io.h"
#include "compress/seeded_random.h"

namespace tidegate::bench {

namespace {

// A gradient-like value: mostly small, a few large (1 in 61), depending on rank and element.
float gradient_value(int rank, int64_t i) {
  const uint64_t bits = mix64(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull ^
                              (static_cast<uint64_t>(rank) + 1) * 0xd1b54a32d192ed03ull);
  const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  return static_cast<float>(i % 61 == 0 ? unit : unit * 0.01);
}

TensorView view_of(void* data, int64_t count, tidegate_dtype_t dtype) {
  TensorView v;
  v.data = data;
  v.count = count;
  v.dtype = dtype;
  return v;
}

}  // namespace

CompressedCase::CompressedCase(const std::string& codec, const std::string& algorithm,
                               bool error_feedback, tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                               int rank, int size, int64_t bytes, uint64_t key)
    : spec_(codec),
      algorithm_(algorithm),
      error_feedback_(error_feedback),
      dtype_(dtype),
      op_(op),
      rank_(rank),
      size_(size),
      count_(bytes / static_cast<int64_t>(tidegate_dtype_size(dtype))),
      key_(key) {
  // The most square rows x cols = count: PowerSGD's matrix (4096 x 4096 at 64 MiB of float32).
  for (int64_t r = static_cast<int64_t>(std::sqrt(static_cast<double>(count_))); r >= 1; --r) {
    if (count_ % r == 0) {
      rows_ = r;
      cols_ = count_ / r;
      break;
    }
  }
}

Status CompressedCase::prepare() {
  TG_RETURN_IF_ERROR(Config::from_environment(&config_));
  auto_ = spec_ == "auto";
  if (!auto_) {
    std::unique_ptr<Codec> made;
    TG_RETURN_IF_ERROR(make_codec(spec_, &made));
    codec_ = std::shared_ptr<const Codec>(std::move(made));
  } else if (!algorithm_.empty()) {
    return config_error("--codec auto picks its own algorithm; drop --codec-algo");
  }
  if (!auto_ && algorithm_.empty() && codec_->id() != CodecId::kNone) {
    algorithm_ = default_compressed_algorithm(*codec_)->name;
  }
  const std::vector<float> values = rank_input(rank_);
  input_.resize(static_cast<size_t>(bytes()));
  output_.resize(static_cast<size_t>(bytes()));
  store_floats(values.data(), count_, view_of(input_.data(), count_, dtype_), 0, false);
  return Status::ok();
}

std::vector<float> CompressedCase::rank_input(int rank) const {
  std::vector<float> values(static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i) values[i] = gradient_value(rank, i);
  // What a tensor of dtype holds.
  std::vector<uint8_t> rounded(static_cast<size_t>(bytes()));
  const TensorView v = view_of(rounded.data(), count_, dtype_);
  store_floats(values.data(), count_, v, 0, false);
  load_floats(v, 0, count_, values.data());
  return values;
}

tidegate_compression_t CompressedCase::options(uint64_t key, bool error_feedback) const {
  tidegate_compression_t o{};
  o.codec = spec_.c_str();
  o.key = key;
  o.error_feedback = error_feedback ? 1 : 0;
  o.algorithm = algorithm_.empty() ? nullptr : algorithm_.c_str();
  o.allowed = auto_ && !allowed_.empty() ? allowed_.c_str() : nullptr;
  return o;
}

void CompressedCase::tensors(tidegate_tensor_t* in, tidegate_tensor_t* out) {
  *in = tidegate_host_tensor(input_.data(), count_, dtype_);
  *out = tidegate_host_tensor(output_.data(), count_, dtype_);
  in->rows = out->rows = rows_;
  in->cols = out->cols = cols_;
}

tidegate_status_t CompressedCase::post_and_wait(tidegate_comm_t comm, uint64_t key,
                                                bool error_feedback, uint64_t* bytes_sent,
                                                std::string* choice) {
  tidegate_tensor_t in, out;
  tensors(&in, &out);
  const tidegate_compression_t o = options(key, error_feedback);
  tidegate_request_t request = nullptr;
  tidegate_status_t st = tidegate_icompressed_allreduce(comm, &in, &out, op_, &o, &request);
  if (st != TIDEGATE_OK) return st;
  st = tidegate_request_wait(request, -1);
  if (st == TIDEGATE_OK) st = tidegate_request_bytes_sent(request, bytes_sent);
  char buffer[512];
  if (st == TIDEGATE_OK) st = tidegate_request_choice(request, buffer, sizeof buffer);
  if (st == TIDEGATE_OK) *choice = buffer;
  tidegate_request_free(request);
  return st;
}

tidegate_status_t CompressedCase::run(tidegate_comm_t comm) {
  tidegate_tensor_t in, out;
  tensors(&in, &out);
  const tidegate_compression_t o = options(key_, error_feedback_);
  return tidegate_compressed_allreduce(comm, &in, &out, op_, &o);
}

tidegate_status_t CompressedCase::run_reporting(tidegate_comm_t comm, uint64_t* bytes_sent,
                                                std::string* choice) {
  return post_and_wait(comm, key_, error_feedback_, bytes_sent, choice);
}

Status CompressedCase::check(tidegate_comm_t comm, CompressedCheck* result) {
  // A key of its own, error feedback off: this step alone, from a fresh state (step 0).
  const uint64_t key = key_ ^ 0xc4ec4ec4ec4ec4ecull;
  uint64_t sent = 0;
  TG_RETURN_IF_ERROR(from_tidegate(post_and_wait(comm, key, false, &sent, &result->choice),
                                   "compressed allreduce (check)"));
  if (auto_) {
    // "transport/algorithm+codec" or "transport/algorithm" (dense): model what the plan ran.
    const size_t slash = result->choice.find('/'), plus = result->choice.find('+');
    codec_.reset();
    algorithm_.clear();
    if (plus != std::string::npos) {
      std::unique_ptr<Codec> made;
      TG_RETURN_IF_ERROR(make_codec(result->choice.substr(plus + 1), &made));
      codec_ = std::shared_ptr<const Codec>(std::move(made));
      algorithm_ = result->choice.substr(slash + 1, plus - slash - 1);
    }
  }
  const bool dense = codec_ == nullptr || codec_->id() == CodecId::kNone;
  result->algorithm = dense ? "dense" : algorithm_;
  // Identical on every rank: gather the hashes.
  int64_t hash = static_cast<int64_t>(fnv1a(output_.data(), output_.size()));
  std::vector<int64_t> hashes(static_cast<size_t>(size_));
  tidegate_tensor_t h = tidegate_host_tensor(&hash, 1, TIDEGATE_INT64);
  tidegate_tensor_t all = tidegate_host_tensor(hashes.data(), size_, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_allgather(comm, &h, &all), "allgather of hashes"));
  double figures[2] = {0, 0};  // wrong elements, rel_error (rank 0's)
  if (rank_ == 0) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < size_; ++r) inputs.push_back(rank_input(r));
    std::vector<float> got(static_cast<size_t>(count_));
    load_floats(view_of(output_.data(), count_, dtype_), 0, count_, got.data());
    const bool average = op_ == TIDEGATE_AVG;
    double error = 0, norm = 0;
    for (int64_t i = 0; i < count_; ++i) {
      double exact = 0;
      for (const auto& x : inputs) exact += x[i];
      if (average) exact /= size_;
      error += (got[i] - exact) * (got[i] - exact);
      norm += exact * exact;
    }
    figures[1] = norm > 0 ? std::sqrt(error / norm) : 0;
    if (!dense) {
      ModelInputs model;
      model.codec = codec_.get();
      model.algorithm = algorithm_;
      model.inputs = &inputs;
      model.average = average;
      model.key = key;
      model.step = 0;
      model.rows = rows_;
      model.cols = cols_;
      model.config = &config_;
      std::vector<float> want;
      double tolerance = 0;
      TG_RETURN_IF_ERROR(model_result(model, &want, &tolerance));
      // The model's float32 result as the output's dtype holds it.
      std::vector<uint8_t> rounded(static_cast<size_t>(bytes()));
      store_floats(want.data(), count_, view_of(rounded.data(), count_, dtype_), 0, false);
      load_floats(view_of(rounded.data(), count_, dtype_), 0, count_, want.data());
      figures[0] = static_cast<double>(count_differences(got, want, tolerance));
    }
  }
  tidegate_tensor_t f = tidegate_host_tensor(figures, 2, TIDEGATE_FLOAT64);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_broadcast(comm, &f, 0), "broadcast of the check"));
  result->wrong = static_cast<int64_t>(figures[0]);
  for (int64_t other : hashes) result->wrong += other != hashes[0] ? 1 : 0;
  result->rel_error = figures[1];
  return Status::ok();
}

}  // namespace tidegate::bench
