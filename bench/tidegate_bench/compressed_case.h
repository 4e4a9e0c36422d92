// A compressed allreduce row of tidegate-bench (--codec): gradient-like inputs of the dense
// row's size, the compressed allreduce timed with the codec (and --ef), its wire bytes, and a
// check run (error feedback off, a fresh key, so one step is seen alone) whose result is
// compared bit for bit across ranks, with the model of compressed_model.h (a reference built
// from the same decoded payloads) and with the exact float64 sum (rel_error).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "compress/codec.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

struct CompressedCheck {
  int64_t wrong = 0;      // elements off the model, plus ranks whose result differs
  double rel_error = 0;   // ||result - exact|| / ||exact||
  std::string algorithm;  // the compressed algorithm that ran ("dense" for none)
  std::string choice;     // what ran the check op: tidegate_request_choice
};

class CompressedCase {
 public:
  // `bytes` is rounded down to whole elements of dtype (float32, float16 or bfloat16).
  CompressedCase(const std::string& codec, const std::string& algorithm, bool error_feedback,
                 tidegate_dtype_t dtype, tidegate_reduce_op_t op, int rank, int size, int64_t bytes,
                 uint64_t key);

  // Codec "auto": the allow-list the plan chooses from ("" = TIDEGATE_CODECS).
  void set_allowed(std::string allowed) { allowed_ = std::move(allowed); }

  // CONFIG error for a spec that does not parse (checked before any rank posts).
  Status prepare();
  int64_t bytes() const { return count_ * static_cast<int64_t>(tidegate_dtype_size(dtype_)); }
  int64_t count() const { return count_; }
  const std::string& codec_spec() const { return spec_; }

  // One timed compressed allreduce: the blocking call, as the dense rows time tidegate_allreduce
  // (the caller runs the op itself; a post and a wait would hand it to the progress thread and
  // back, tens of microseconds a small op does not take in a blocking call).
  tidegate_status_t run(tidegate_comm_t comm);
  // The same op posted and waited for, untimed: *bytes_sent is this rank's payload bytes and
  // *choice what ran it (tidegate_request_choice).
  tidegate_status_t run_reporting(tidegate_comm_t comm, uint64_t* bytes_sent, std::string* choice);
  // The check run (collective: every rank calls it).
  Status check(tidegate_comm_t comm, CompressedCheck* result);

 private:
  tidegate_compression_t options(uint64_t key, bool error_feedback) const;
  // The case's input and output buffers as tensors (with the matrix shape, for PowerSGD).
  void tensors(tidegate_tensor_t* in, tidegate_tensor_t* out);
  std::vector<float> rank_input(int rank) const;

  tidegate_status_t post_and_wait(tidegate_comm_t comm, uint64_t key, bool error_feedback,
                                  uint64_t* bytes_sent, std::string* choice);

  std::string spec_, algorithm_, allowed_;
  bool auto_ = false;  // codec "auto": codec_ is set per check run from the plan's choice
  bool error_feedback_ = false;
  tidegate_dtype_t dtype_;
  tidegate_reduce_op_t op_;
  int rank_, size_;
  int64_t count_ = 0;
  int64_t rows_ = 0, cols_ = 0;  // a near-square shape (PowerSGD's matrix)
  uint64_t key_ = 0;
  std::shared_ptr<const Codec> codec_;
  Config config_;
  std::vector<uint8_t> input_, output_;
};

}  // namespace tidegate::bench
