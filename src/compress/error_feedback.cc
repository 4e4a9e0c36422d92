#include "compress/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "compress/float_io.h"
#include "compress/payload.h"

namespace tidegate {

struct ResidualStore::Entry {
  bool wide = false;  // float64 residual (float64 tensors), else float32
  int64_t count = 0;
  std::vector<float> f;
  std::vector<double> d;
};

struct ResidualStore::Scratch {
  std::vector<float> compensated_f, sent_f;
  std::vector<double> compensated_d, sent_d;
  std::vector<uint16_t> narrow;  // the compensated tensor in f16/bf16, and what decodes into it
};

namespace {

TensorView host_view(void* data, int64_t count, tidegate_dtype_t dtype) {
  TensorView v;
  v.data = data;
  v.count = count;
  v.dtype = dtype;
  return v;
}

// A host view over scratch memory with the shape of the caller's tensor: matrix codecs
// (PowerSGD) need rows x cols on the compensated tensor as much as on the input.
TensorView shaped_view(void* data, const TensorView& like, tidegate_dtype_t dtype) {
  TensorView v = host_view(data, like.count, dtype);
  v.rows = like.rows;
  v.cols = like.cols;
  return v;
}

std::string key_text(uint64_t key) {
  return "error feedback for tensor key " + std::to_string(key);
}

template <typename Acc>
constexpr tidegate_dtype_t acc_dtype() {
  return std::is_same_v<Acc, double> ? TIDEGATE_FLOAT64 : TIDEGATE_FLOAT32;
}

// One error-feedback step in precision Acc. On success `sent` holds the new residual and
// *bytes the payload size; nothing outside the scratch vectors and `out` is written.
template <typename Acc>
Status feedback_step(const Codec& codec, const TensorView& input, const std::vector<Acc>* residual,
                     const EncodeContext& context, uint8_t* out, size_t capacity, size_t* bytes,
                     std::vector<Acc>& compensated, std::vector<Acc>& sent,
                     std::vector<uint16_t>& narrow) {
  const size_t count = static_cast<size_t>(input.count);
  compensated.resize(count);
  sent.resize(count);
  if constexpr (std::is_same_v<Acc, double>) {
    if (count > 0) std::memcpy(compensated.data(), input.data, input.bytes());
    if (residual != nullptr) {
      for (size_t i = 0; i < count; ++i) compensated[i] += (*residual)[i];
    }
  } else {
    load_floats(input, 0, input.count, compensated.data());
    if (residual != nullptr) add_floats(residual->data(), input.count, compensated.data());
  }
  TensorView encoded = shaped_view(compensated.data(), input, acc_dtype<Acc>());
  if constexpr (std::is_same_v<Acc, float>) {
    if (input.dtype == TIDEGATE_FLOAT16 || input.dtype == TIDEGATE_BFLOAT16) {
      // Encode and decode in the tensor's own dtype, as its receivers will; rounding the
      // compensated value to 16 bits becomes part of the residual.
      narrow.resize(count);
      encoded = shaped_view(narrow.data(), input, input.dtype);
      store_floats(compensated.data(), input.count, encoded, 0, false);
    }
  }
  TG_RETURN_IF_ERROR(codec.encode(encoded, context, out, capacity, bytes));
  if (encoded.dtype == acc_dtype<Acc>()) {
    TG_RETURN_IF_ERROR(
        codec.decode(out, *bytes, shaped_view(sent.data(), input, acc_dtype<Acc>())));
  } else if constexpr (std::is_same_v<Acc, float>) {
    TG_RETURN_IF_ERROR(codec.decode(out, *bytes, encoded));
    load_floats(encoded, 0, input.count, sent.data());
  }
  bool finite = true;
  for (size_t i = 0; i < count; ++i) {
    sent[i] = compensated[i] - sent[i];
    finite &= std::isfinite(sent[i]);
  }
  if (!finite) {
    return invalid_argument("the new residual would not be finite (codec " + codec.spec() +
                            "); the residual was left unchanged");
  }
  return Status::ok();
}

}  // namespace

ResidualStore::ResidualStore() = default;
ResidualStore::~ResidualStore() = default;

ResidualStore::Entry* ResidualStore::find(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.get();
}

std::unique_ptr<ResidualStore::Scratch> ResidualStore::take_scratch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_scratch_.empty()) return std::make_unique<Scratch>();
  auto scratch = std::move(free_scratch_.back());
  free_scratch_.pop_back();
  return scratch;
}

void ResidualStore::give_scratch(std::unique_ptr<Scratch> scratch) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_scratch_.push_back(std::move(scratch));
}

Status ResidualStore::encode_with_feedback(const Codec& codec, uint64_t key,
                                           const TensorView& input, const EncodeContext& context,
                                           uint8_t* out, size_t capacity, size_t* written) {
  TG_RETURN_IF_ERROR(check_codec_tensor(codec.id(), input, "input"));
  const bool wide = input.dtype == TIDEGATE_FLOAT64;
  Entry* entry = find(key);
  if (entry != nullptr && (entry->count != input.count || entry->wide != wide)) {
    return invalid_argument(key_text(key) + ": the residual holds " + std::to_string(entry->count) +
                            (entry->wide ? " float64" : " float32") + " values but the tensor is " +
                            std::to_string(input.count) + " " + dtype_name(input.dtype) +
                            " elements (reset the key when a tensor changes shape)");
  }
  std::unique_ptr<Scratch> s = take_scratch();
  size_t bytes = 0;
  Status status =
      wide ? feedback_step<double>(codec, input, entry != nullptr ? &entry->d : nullptr, context,
                                   out, capacity, &bytes, s->compensated_d, s->sent_d, s->narrow)
           : feedback_step<float>(codec, input, entry != nullptr ? &entry->f : nullptr, context,
                                  out, capacity, &bytes, s->compensated_f, s->sent_f, s->narrow);
  if (status.is_ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entry == nullptr) {
      auto made = std::make_unique<Entry>();
      made->wide = wide;
      made->count = input.count;
      entry = made.get();
      entries_[key] = std::move(made);
    }
    // The new residual moves in; the old one's memory becomes the next call's scratch.
    if (wide) {
      entry->d.swap(s->sent_d);
    } else {
      entry->f.swap(s->sent_f);
    }
    *written = bytes;
  }
  give_scratch(std::move(s));
  if (!status.is_ok()) return std::move(status).with_context(key_text(key) + ": ");
  return Status::ok();
}

Status ResidualStore::swap_float_residual(uint64_t key, std::vector<float>* values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  TG_CHECK_ARG(it != entries_.end() && !it->second->wide &&
                   static_cast<int64_t>(values->size()) == it->second->count,
               key_text(key) + ": no float32 residual of " + std::to_string(values->size()) +
                   " elements to replace");
  std::swap(it->second->f, *values);
  return Status::ok();
}

Status ResidualStore::float_residual(uint64_t key, int64_t count, float** residual) {
  TG_CHECK_ARG(count >= 0, key_text(key) + ": negative count");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    auto made = std::make_unique<Entry>();
    made->count = count;
    made->f.assign(static_cast<size_t>(count), 0.0f);
    it = entries_.emplace(key, std::move(made)).first;
  }
  Entry& entry = *it->second;
  if (entry.count != count || entry.wide) {
    return invalid_argument(key_text(key) + ": the residual holds " + std::to_string(entry.count) +
                            (entry.wide ? " float64" : " float32") + " values but the tensor has " +
                            std::to_string(count) +
                            " elements (reset the key when a tensor changes shape)");
  }
  *residual = entry.f.data();
  return Status::ok();
}

Status ResidualStore::flush(uint64_t key, const TensorView& dense) {
  Entry* entry = find(key);
  if (entry == nullptr) return Status::ok();
  TG_CHECK_ARG(dense.memory == TIDEGATE_MEMORY_HOST, key_text(key) + ": flush needs a host tensor");
  TG_RETURN_IF_ERROR(check_codec_tensor(CodecId::kNone, dense, "flush target"));
  TG_CHECK_ARG(dense.count == entry->count && (dense.dtype == TIDEGATE_FLOAT64) == entry->wide,
               key_text(key) + ": flush into " + std::to_string(dense.count) + " " +
                   dtype_name(dense.dtype) + " elements, but the residual holds " +
                   std::to_string(entry->count) + (entry->wide ? " float64" : " float32") +
                   " values");
  if (entry->wide) {
    double* d = static_cast<double*>(dense.data);
    for (int64_t i = 0; i < dense.count; ++i) d[i] += entry->d[static_cast<size_t>(i)];
    std::fill(entry->d.begin(), entry->d.end(), 0.0);
  } else {
    store_floats(entry->f.data(), dense.count, dense, 0, true);
    std::fill(entry->f.begin(), entry->f.end(), 0.0f);
  }
  return Status::ok();
}

void ResidualStore::reset(uint64_t key) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(key);
}

void ResidualStore::reset_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  free_scratch_.clear();
}

bool ResidualStore::has(uint64_t key) const { return find(key) != nullptr; }

size_t ResidualStore::keys() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

Status ResidualStore::residual(uint64_t key, std::vector<double>* values) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return invalid_argument(key_text(key) + ": no residual stored");
  if (entry->wide) {
    values->assign(entry->d.begin(), entry->d.end());
  } else {
    values->assign(entry->f.begin(), entry->f.end());
  }
  return Status::ok();
}

Status ResidualStore::save(std::vector<uint8_t>* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> keys;
  size_t total = 16;
  for (const auto& [key, entry] : entries_) {
    keys.push_back(key);
    total +=
        24 + static_cast<size_t>(entry->count) * (entry->wide ? sizeof(double) : sizeof(float));
  }
  std::sort(keys.begin(), keys.end());
  out->assign(total, 0);
  PayloadWriter writer(out->data(), out->size());
  writer.put<uint32_t>(kSaveMagic);
  writer.put<uint32_t>(kSaveVersion);
  writer.put<uint64_t>(keys.size());
  for (uint64_t key : keys) {
    const Entry& e = *entries_.at(key);
    writer.put<uint64_t>(key);
    writer.put<uint64_t>(e.wide ? TIDEGATE_FLOAT64
                                : TIDEGATE_FLOAT32);  // dtype byte and 7 zero bytes
    writer.put<int64_t>(e.count);
    if (e.wide) {
      writer.bytes(e.d.data(), e.d.size() * sizeof(double));
    } else {
      writer.bytes(e.f.data(), e.f.size() * sizeof(float));
    }
  }
  return writer.status();
}

Status ResidualStore::load(const uint8_t* data, size_t bytes) {
  const std::string what = "error-feedback checkpoint: ";
  PayloadReader reader(data, bytes);
  uint32_t magic = 0, version = 0;
  uint64_t count = 0;
  if (!reader.get(&magic).is_ok() || magic != kSaveMagic)
    return invalid_argument(what + "bad magic (not a residual buffer)");
  if (!reader.get(&version).is_ok() || version != kSaveVersion) {
    return invalid_argument(what + "version " + std::to_string(version) + " is not " +
                            std::to_string(kSaveVersion));
  }
  if (!reader.get(&count).is_ok() || count > reader.remaining() / 24) {
    return invalid_argument(what + "entry count " + std::to_string(count) + " does not fit in " +
                            std::to_string(bytes) + " bytes");
  }
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> loaded;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t key = 0, dtype = 0;
    int64_t n = 0;
    const uint8_t* values = nullptr;
    if (!reader.get(&key).is_ok() || !reader.get(&dtype).is_ok() || !reader.get(&n).is_ok()) {
      return invalid_argument(what + "truncated in entry " + std::to_string(i));
    }
    if (dtype != TIDEGATE_FLOAT32 && dtype != TIDEGATE_FLOAT64) {
      return invalid_argument(what + "entry " + std::to_string(i) + " has an invalid dtype field");
    }
    const size_t size = dtype == TIDEGATE_FLOAT64 ? sizeof(double) : sizeof(float);
    if (n < 0 || static_cast<uint64_t>(n) > reader.remaining() / size ||
        !reader.take(static_cast<size_t>(n) * size, &values).is_ok()) {
      return invalid_argument(what + "entry " + std::to_string(i) + " claims " + std::to_string(n) +
                              " values, more than the buffer holds");
    }
    auto e = std::make_unique<Entry>();
    e->wide = dtype == TIDEGATE_FLOAT64;
    e->count = n;
    bool finite = true;
    if (e->wide) {
      e->d.resize(static_cast<size_t>(n));
      if (n > 0) std::memcpy(e->d.data(), values, static_cast<size_t>(n) * size);
      for (double v : e->d) finite &= std::isfinite(v);
    } else {
      e->f.resize(static_cast<size_t>(n));
      if (n > 0) std::memcpy(e->f.data(), values, static_cast<size_t>(n) * size);
      finite = first_nonfinite(e->f.data(), n) < 0;
    }
    if (!finite)
      return invalid_argument(what + "entry for key " + std::to_string(key) +
                              " holds non-finite values");
    if (!loaded.emplace(key, std::move(e)).second) {
      return invalid_argument(what + "key " + std::to_string(key) + " appears twice");
    }
  }
  if (reader.remaining() != 0)
    return invalid_argument(what + std::to_string(reader.remaining()) + " trailing bytes");
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.swap(loaded);
  return Status::ok();
}

}  // namespace tidegate
