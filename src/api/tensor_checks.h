// Local validation of the caller's tensors and per-collective arguments at the API edge.
// Cross-rank agreement (same count, dtype, op everywhere) is checked on the wire instead.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "collectives/collective_args.h"
#include "tidegate/tidegate.h"

namespace tidegate {

// Converts and validates a caller's tensor view; `role` ("input", "output") names it in errors.
Status check_tensor(const tidegate_tensor_t* tensor, const char* role, TensorView* view);

// Copies a per-rank array of `size` entries, rejecting NULL and negative values.
Status copy_rank_array(const int64_t* values, int size, const char* role,
                       std::vector<int64_t>* out);

// Builds validated CollectiveArgs for each collective (rank/size of the caller's communicator).
Status allreduce_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                      tidegate_reduce_op_t op, CollectiveArgs* args);
Status reduce_scatter_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                           tidegate_reduce_op_t op, int rank, int size, CollectiveArgs* args);
Status allgather_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output, int size,
                      CollectiveArgs* args);
Status allgatherv_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                       const int64_t* counts, int rank, int size, CollectiveArgs* args);
Status broadcast_args(const tidegate_tensor_t* tensor, int root, int size, CollectiveArgs* args);
Status alltoallv_args(const tidegate_tensor_t* input, const int64_t* send_counts,
                      const int64_t* send_offsets, const tidegate_tensor_t* output,
                      const int64_t* recv_counts, const int64_t* recv_offsets, int size,
                      CollectiveArgs* args);

}  // namespace tidegate
