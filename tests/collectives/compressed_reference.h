// References for the compressed allreduce tests: test gradients, and the results an algorithm
// must give, computed the simple way (one rank's view of the whole job, no messages) with the
// same codec objects. For deterministic codecs these are exact: the collective must match them
// bit for bit; for stochastic ones the tests compare with the exact sum within a bound.
#pragma once

#include <cstdint>
#include <vector>

#include "compress/codec.h"
#include "reference.h"

namespace tidegate::testing {

using Floats = std::vector<float>;

// Rank r's gradient of n elements: pseudo-random values of mixed magnitudes (a few large, many
// small, some exact zeros), different on every rank and for every step.
Floats gradient(int rank, int64_t n, uint64_t step);

// Floats rounded through dtype (float32, float16, bfloat16) and back: what a tensor of that
// dtype holds; and the bytes of such a tensor.
Floats round_to(tidegate_dtype_t dtype, const Floats& values);
Bytes to_bytes(tidegate_dtype_t dtype, const Floats& values);
Floats from_bytes(tidegate_dtype_t dtype, const Bytes& bytes);

// decode(encode(x)) of a float32 slice (deterministic codecs: the seed is not used).
Floats roundtrip(const Codec& codec, const float* x, int64_t n);

// The allgather's and the sparse reduce-scatter's result: the float32 sum in rank order of every
// rank's decoded payload, divided by P for AVG.
Floats sum_of_decoded(const Codec& codec, const std::vector<Floats>& inputs, bool average);

// Scatter-reduce-allgather's result for a deterministic codec: block c (block_range) is owned
// by rank c and cut into segments of `segment` elements; each segment's owner sums, in rank
// order, the decoded encodings of the others' slices and its own slice, divides by P for AVG
// and the result is the decoding of its encoding of that.
Floats sra_result(const Codec& codec, const std::vector<Floats>& inputs, int64_t segment,
                  bool average);

// signSGD's majority vote: -1 when more than half of the ranks' values are negative, +1 when
// fewer, 0 on a tie.
Floats majority_vote(const std::vector<Floats>& inputs);

// The exact sum (or mean) in double.
std::vector<double> exact_sum(const std::vector<Floats>& inputs, bool average);

// ||got - exact||_2 / ||exact||_2 (0 when both are 0).
double relative_l2(const Floats& got, const std::vector<double>& exact);

}  // namespace tidegate::testing
