// The check of a compressed allreduce row: what each algorithm must have produced, recomputed on
// one rank from every rank's input (the bench's inputs are a function of the rank) with the same
// codec, seeds and segments the library used, without a message. Where the library reduces in
// a fixed rank order the model does the same and the check is exact; where a dense
// suballreduce sums (shared-index random-k's values, PowerSGD's factors) the ring's order differs
// from the model's and the check allows float32 rounding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "compress/codec.h"

namespace tidegate::bench {

struct ModelInputs {
  const Codec* codec = nullptr;
  std::string algorithm;  // a compressed row's name (sra, allgather, ...)
  const std::vector<std::vector<float>>* inputs = nullptr;  // per rank, float32 values
  bool average = false;
  uint64_t key = 0;
  uint64_t step = 0;  // the key's step of the checked op
  int64_t rows = 0, cols = 0;
  const Config* config = nullptr;  // job seed, segment size
};

// The result every rank must hold, and the tolerance (0: exact; else relative to the largest
// magnitude of the result).
Status model_result(const ModelInputs& in, std::vector<float>* result, double* tolerance);

// Elements of `got` that differ from `want` by more than tolerance * max |want| (exactly, with
// -0 == +0, for a tolerance of 0).
int64_t count_differences(const std::vector<float>& got, const std::vector<float>& want,
                          double tolerance);

}  // namespace tidegate::bench
