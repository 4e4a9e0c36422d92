#include "collectives/compressed/compression_state.h"

#include <cmath>
#include <cstring>
#include <string>

#include "compress/float_io.h"
#include "compress/payload.h"

namespace tidegate {

namespace {

const std::string kWhat = "compression-state checkpoint: ";

// A length-prefixed blob in a checkpoint.
Status read_blob(PayloadReader* reader, const char* part, const uint8_t** data, uint64_t* bytes) {
  if (!reader->get(bytes).is_ok() || *bytes > reader->remaining() ||
      !reader->take(static_cast<size_t>(*bytes), data).is_ok()) {
    return invalid_argument(kWhat + "truncated in the " + part);
  }
  return Status::ok();
}

Status read_count(PayloadReader* reader, const char* part, size_t entry_bytes, uint64_t* count) {
  if (!reader->get(count).is_ok() || *count > reader->remaining() / entry_bytes) {
    return invalid_argument(kWhat + "the " + part + " claim more entries than the buffer holds");
  }
  return Status::ok();
}

}  // namespace

CompressionState::CompressionState()
    : sender_(std::make_unique<ResidualStore>()), owner_(std::make_unique<ResidualStore>()) {}

uint64_t CompressionState::step(uint64_t key) const {
  auto it = steps_.find(key);
  return it == steps_.end() ? 0 : it->second;
}

Status CompressionState::flush(uint64_t key, const TensorView& dense, int world_size_if_averaged) {
  TG_RETURN_IF_ERROR(sender_->flush(key, dense));
  sender_->reset(key);
  spares_.erase(key);
  if (!owner_->has(key)) return Status::ok();
  float* residual = nullptr;
  TG_RETURN_IF_ERROR(owner_->float_residual(key, dense.count, &residual));
  // The owner's residual is a part of the sum that was never delivered: sent dense by this
  // rank it arrives divided by the world size when the op averages, so it goes in multiplied.
  const float scale = static_cast<float>(std::max(1, world_size_if_averaged));
  std::vector<float> scaled(residual, residual + dense.count);
  for (float& v : scaled) v *= scale;
  store_floats(scaled.data(), dense.count, dense, 0, true);
  owner_->reset(key);
  return Status::ok();
}

void CompressionState::reset(uint64_t key) {
  sender_->reset(key);
  owner_->reset(key);
  powersgd_.erase(key);
  topk_.erase(key);
  steps_.erase(key);
  spares_.erase(key);
}

void CompressionState::reset_all() {
  sender_->reset_all();
  owner_->reset_all();
  powersgd_.clear();
  topk_.clear();
  steps_.clear();
  spares_.clear();
}

Status CompressionState::save(std::vector<uint8_t>* out) const {
  std::vector<uint8_t> sender, owner;
  TG_RETURN_IF_ERROR(sender_->save(&sender));
  TG_RETURN_IF_ERROR(owner_->save(&owner));
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> powersgd;
  size_t total =
      8 + 8 + sender.size() + 8 + owner.size() + 8 + 8 + steps_.size() * 16 + 8 + topk_.size() * 16;
  for (const auto& [key, state] : powersgd_) {
    powersgd.emplace_back(key, state.save());
    total += 16 + powersgd.back().second.size();
  }
  out->assign(total, 0);
  PayloadWriter writer(out->data(), out->size());
  writer.put<uint32_t>(kSaveMagic);
  writer.put<uint32_t>(kSaveVersion);
  for (const std::vector<uint8_t>* blob : {&sender, &owner}) {
    writer.put<uint64_t>(blob->size());
    writer.bytes(blob->data(), blob->size());
  }
  writer.put<uint64_t>(powersgd.size());
  for (const auto& [key, bytes] : powersgd) {
    writer.put<uint64_t>(key);
    writer.put<uint64_t>(bytes.size());
    writer.bytes(bytes.data(), bytes.size());
  }
  writer.put<uint64_t>(steps_.size());
  for (const auto& [key, step] : steps_) {
    writer.put<uint64_t>(key);
    writer.put<uint64_t>(step);
  }
  writer.put<uint64_t>(topk_.size());
  for (const auto& [key, memory] : topk_) {
    writer.put<uint64_t>(key);
    writer.put<uint32_t>(memory.threshold);
    writer.put<uint32_t>(static_cast<uint32_t>(memory.reuses));
  }
  return writer.status();
}

Status CompressionState::load(const uint8_t* data, size_t bytes) {
  PayloadReader reader(data, bytes);
  uint32_t magic = 0, version = 0;
  if (!reader.get(&magic).is_ok() || magic != kSaveMagic) {
    return invalid_argument(kWhat + "bad magic (not a buffer from tidegate's compression state)");
  }
  if (!reader.get(&version).is_ok() || version != kSaveVersion) {
    return invalid_argument(kWhat + "version " + std::to_string(version) + " is not " +
                            std::to_string(kSaveVersion));
  }
  auto sender = std::make_unique<ResidualStore>();
  auto owner = std::make_unique<ResidualStore>();
  const uint8_t* blob = nullptr;
  uint64_t blob_bytes = 0;
  TG_RETURN_IF_ERROR(read_blob(&reader, "sender residuals", &blob, &blob_bytes));
  TG_RETURN_IF_ERROR(sender->load(blob, static_cast<size_t>(blob_bytes)));
  TG_RETURN_IF_ERROR(read_blob(&reader, "owner residuals", &blob, &blob_bytes));
  TG_RETURN_IF_ERROR(owner->load(blob, static_cast<size_t>(blob_bytes)));

  std::map<uint64_t, PowerSgdState> powersgd;
  uint64_t entries = 0;
  TG_RETURN_IF_ERROR(read_count(&reader, "PowerSGD states", 16, &entries));
  for (uint64_t i = 0; i < entries; ++i) {
    uint64_t key = 0;
    if (!reader.get(&key).is_ok()) return invalid_argument(kWhat + "truncated PowerSGD entry");
    TG_RETURN_IF_ERROR(read_blob(&reader, "PowerSGD states", &blob, &blob_bytes));
    if (!powersgd.emplace(key, PowerSgdState()).second) {
      return invalid_argument(kWhat + "PowerSGD key " + std::to_string(key) + " appears twice");
    }
    TG_RETURN_IF_ERROR(powersgd[key].load(blob, static_cast<size_t>(blob_bytes)));
  }
  std::map<uint64_t, uint64_t> steps;
  TG_RETURN_IF_ERROR(read_count(&reader, "step counters", 16, &entries));
  for (uint64_t i = 0; i < entries; ++i) {
    uint64_t key = 0, step = 0;
    if (!reader.get(&key).is_ok() || !reader.get(&step).is_ok() ||
        !steps.emplace(key, step).second) {
      return invalid_argument(kWhat + "step counter entry " + std::to_string(i) +
                              " is truncated or repeated");
    }
  }
  std::map<uint64_t, TopKMemory> topk;
  TG_RETURN_IF_ERROR(read_count(&reader, "top-k thresholds", 16, &entries));
  for (uint64_t i = 0; i < entries; ++i) {
    uint64_t key = 0;
    uint32_t threshold = 0, reuses = 0;
    if (!reader.get(&key).is_ok() || !reader.get(&threshold).is_ok() ||
        !reader.get(&reuses).is_ok() ||
        !topk.emplace(key, TopKMemory{threshold, static_cast<int>(reuses)}).second) {
      return invalid_argument(kWhat + "top-k entry " + std::to_string(i) +
                              " is truncated or repeated");
    }
  }
  if (reader.remaining() != 0) {
    return invalid_argument(kWhat + std::to_string(reader.remaining()) + " trailing bytes");
  }
  sender_.swap(sender);
  owner_.swap(owner);
  powersgd_.swap(powersgd);
  steps_.swap(steps);
  topk_.swap(topk);
  spares_.clear();  // the old residuals' spares: memory only
  return Status::ok();
}

}  // namespace tidegate
