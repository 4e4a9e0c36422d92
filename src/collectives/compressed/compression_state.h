// What compressed allreduces remember between steps, per communicator and tensor key (DESIGN.md:
// error feedback lives in the collective layer, keyed by tensor key, so every codec gets it and
// it survives re-bucketing):
//  - the sender's residual: what this rank's own encodings left out (error feedback);
//  - the owner's residual: what the re-quantisation of the blocks this rank owns in
//    scatter-reduce-allgather left out (the second residual of DeepSpeed's 1-bit Adam), kept in
//    the sum's domain so that flushing it into a dense send loses nothing whatever the op;
//  - PowerSGD's Q (the warm start);
//  - top-k's last threshold (reused for a few steps, as Ok-Topk does);
//  - the key's step counter, from which stochastic codecs draw their seeds.
// Residuals are float32 for the whole tensor (slices are taken by the algorithms).
//
// Checkpoints: save() writes everything above; load() restores it, so the step after a restore
// is bit for bit the step the saved run would have taken.
//
// Threading: used only on the communicator's progress thread (by tasks, and by the local ops
// that save, load, reset and flush), so it needs no lock of its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "collectives/compressed/buffer_pool.h"
#include "compress/error_feedback.h"
#include "compress/powersgd_math.h"

namespace tidegate {

// Top-k's memory of one key: the magnitude threshold (float bits) of its last full selection
// and how many steps have reused it since.
struct TopKMemory {
  uint32_t threshold = 0;  // 0: none yet
  int reuses = 0;
};

class CompressionState {
 public:
  CompressionState();
  ResidualStore& sender() { return *sender_; }
  ResidualStore& owner() { return *owner_; }
  PowerSgdState& powersgd(uint64_t key) { return powersgd_[key]; }
  TopKMemory& topk(uint64_t key) { return topk_[key]; }

  // The key's step, then advances it (the engine calls it once per op, in posting order).
  uint64_t next_step(uint64_t key) { return steps_[key]++; }

  // Where the sender's next residual of a key is computed before it replaces the current one
  // (ResidualStore::swap_float_residual), so that a refused input leaves the residual as it
  // was without a separate checking pass over the tensor. Kept per key (as large as its
  // residual): memory that alternated between keys of different sizes would be reallocated,
  // and page-faulted, op after op. Not part of any checkpoint.
  std::vector<float>& spare_residual(uint64_t key) { return spares_[key]; }

  // Payload and scratch buffers of the ops (not part of any checkpoint).
  BufferPool& buffers() { return buffers_; }
  uint64_t step(uint64_t key) const;

  // Adds the key's residuals (sender's and owner's) into `dense`, a tensor about to be sent
  // uncompressed, and zeroes them: nothing of the gradient is lost when a key stops being
  // compressed. The owner's residual is in the sum's domain; for an averaged op pass
  // world_size so that it survives the division. No residual: nothing to do. The residuals are
  // then released (a zero residual and none are the same), so later dense ops skip this step.
  Status flush(uint64_t key, const TensorView& dense, int world_size_if_averaged);

  // Whether the key holds a residual (it was compressed with error feedback and not flushed).
  bool has_residual(uint64_t key) const { return sender_->has(key) || owner_->has(key); }

  // Forgets everything about one key / every key.
  void reset(uint64_t key);
  void reset_all();

  // Checkpoint format, little-endian:
  //   "TGCS" u32 | version u32 | sender residuals (ResidualStore::save) as u64 length + bytes |
  //   owner residuals, the same | u64 PowerSGD entries, each u64 key + u64 length + state bytes
  //   | u64 step entries, each u64 key + u64 step | u64 top-k entries, each u64 key + u32
  //   threshold + u32 reuses.
  // load() checks everything before it changes anything (INVALID_ARGUMENT naming the problem);
  // on error the state is unchanged.
  Status save(std::vector<uint8_t>* out) const;
  Status load(const uint8_t* data, size_t bytes);

  static constexpr uint32_t kSaveMagic = 0x53434754;  // "TGCS"
  static constexpr uint32_t kSaveVersion = 1;

 private:
  std::unique_ptr<ResidualStore> sender_;  // pointers, so that load() can swap in what it parsed
  std::unique_ptr<ResidualStore> owner_;
  std::map<uint64_t, PowerSgdState> powersgd_;
  std::map<uint64_t, TopKMemory> topk_;
  std::map<uint64_t, uint64_t> steps_;
  std::map<uint64_t, std::vector<float>> spares_;
  BufferPool buffers_;
};

}  // namespace tidegate
