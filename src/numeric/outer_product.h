// Sums of outer products, the arithmetic of Poseidon's sufficient factors: a fully connected
// layer's gradient is sum_k u_k v_k^T over the batch, so a rank can send the factors (K x M and
// K x N) instead of the M x N matrix and every rank forms the matrix itself.
//
// Bitwise identical on every machine: each output element is accumulated in float32 as
// out = (((0 + a_0 b_0) + a_1 b_1) + ...) in factor order, with a separate multiply and add
// (this file is built without FMA contraction), whatever the vector width the CPU offers or
// the number of threads. Ranks that call it on the same factors in the same order get the same
// bits.
#pragma once

#include <cstdint>

namespace tidegate {

// One block of factors: u is k x m, v is k x n, both row-major float32.
struct FactorBlock {
  const float* u = nullptr;
  const float* v = nullptr;
  int64_t k = 0;
};

// out (m x n, row-major) = sum over blocks in order, over rows r of each block in order, of
// u[r, :]^T v[r, :]. `threads` > 1 splits the rows of out (same bits for any count).
void sum_outer_products(const FactorBlock* blocks, int block_count, int64_t m, int64_t n,
                        float* out, int threads = 1);

}  // namespace tidegate
