// One benchmark row: a collective at one size, its buffers, the inputs each rank contributes
// and the exact output every rank must end up with.
//
// Inputs are small integers chosen so that every reduction is exact in every dtype (sums stay
// within the range where float16/bfloat16/uint8 represent integers exactly, products are
// +-2), so a checked result is compared bit for bit, not within a tolerance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tidegate/tidegate.h"

namespace tidegate::bench {

enum class Collective {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kAllgatherv,
  kBroadcast,
  kAlltoallv
};

struct CollectiveTraits {
  const char* name;
  bool reduces;           // takes a reduce op
  bool identical_output;  // every rank ends with the same bytes (checked by hash)
  bool has_in_place;      // this tool times an in-place variant
};

const CollectiveTraits& traits(Collective collective);
bool parse_collective(const std::string& name, Collective* collective);
// nccl-tests' bus bandwidth factor: busbw = algbw * factor, comparable across collectives
// and world sizes with the hardware's link bandwidth.
double busbw_factor(Collective collective, int world_size);

class BenchCase {
 public:
  // A case moving about `bytes` (rounded down so that every rank's share is whole elements).
  BenchCase(Collective collective, tidegate_dtype_t dtype, tidegate_reduce_op_t op, int root,
            int rank, int size, int64_t bytes);

  // The "size" and "count" columns: the larger of the input and output buffers.
  int64_t count() const { return count_; }
  int64_t bytes() const;

  // Writes this rank's inputs (and a recognisable garbage pattern into the output).
  void fill();
  // Runs the collective once, blocking. in_place: the output buffer is also the input (its
  // contents must be restored with prepare_in_place() before each run).
  tidegate_status_t run(tidegate_comm_t comm, bool in_place);
  void prepare_in_place();

  // Elements of this rank's output that differ from the expected result.
  int64_t count_wrong() const;
  // FNV-1a of the output bytes, for the cross-rank identity check.
  uint64_t output_hash() const;

  // Raw buffers and layout, for the MPI baseline.
  Collective collective() const { return collective_; }
  tidegate_dtype_t dtype() const { return dtype_; }
  tidegate_reduce_op_t op() const { return op_; }
  int root() const { return root_; }
  void* input() { return input_.data(); }
  void* output() { return output_.data(); }
  int64_t input_count() const { return in_count_; }
  int64_t output_count() const { return out_count_; }
  const std::vector<int64_t>& rank_counts() const { return counts_; }  // allgatherv, alltoallv
  const std::vector<int64_t>& rank_offsets() const { return offsets_; }

 private:
  double input_value(int rank, int64_t i) const;
  double expected_value(int64_t i) const;
  double reduced_value(int64_t i) const;

  Collective collective_;
  tidegate_dtype_t dtype_;
  tidegate_reduce_op_t op_;
  int root_, rank_, size_;
  int amplitude_ = 1;  // inputs of reductions lie in [-amplitude, amplitude]
  int64_t count_ = 0;  // elements in the size column
  int64_t in_count_ = 0, out_count_ = 0;
  std::vector<int64_t> counts_, offsets_;  // per-rank blocks (allgatherv, alltoallv)
  std::vector<unsigned char> input_, output_;
};

}  // namespace tidegate::bench
