// The C edge of the collectives: each i* function validates its arguments locally, posts the
// collective and hands back a request; each blocking wrapper posts and waits.
#include <memory>

#include "api/c_api_internal.h"
#include "api/tensor_checks.h"

using tidegate::CollectiveArgs;
using tidegate::Status;

namespace {

// Validates with `build(args)`, then posts on comm.
template <typename Build>
tidegate_status_t post_collective(tidegate_comm_t comm, tidegate_request_t* request,
                                  Build&& build) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    TG_CHECK_ARG(request != nullptr, "request output pointer is NULL");
    CollectiveArgs args;
    TG_RETURN_IF_ERROR(build(comm->impl->rank(), comm->impl->size(), &args));
    return tidegate::c_api_post(comm, std::move(args), request);
  });
}

// Posts with `post(&request)` then waits for and frees the request.
template <typename Post>
tidegate_status_t blocking(Post&& post) {
  tidegate_request_t request = nullptr;
  tidegate_status_t posted = post(&request);
  if (posted != TIDEGATE_OK) return posted;
  return tidegate::c_api_wait_and_free(request);
}

}  // namespace

extern "C" {

tidegate_status_t tidegate_iallreduce(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                                      tidegate_request_t* request) {
  return post_collective(comm, request, [&](int, int, CollectiveArgs* args) {
    return tidegate::allreduce_args(input, output, op, args);
  });
}

tidegate_status_t tidegate_ireduce_scatter(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                           const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                                           tidegate_request_t* request) {
  return post_collective(comm, request, [&](int rank, int size, CollectiveArgs* args) {
    return tidegate::reduce_scatter_args(input, output, op, rank, size, args);
  });
}

tidegate_status_t tidegate_iallgather(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output,
                                      tidegate_request_t* request) {
  return post_collective(comm, request, [&](int, int size, CollectiveArgs* args) {
    return tidegate::allgather_args(input, output, size, args);
  });
}

tidegate_status_t tidegate_iallgatherv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                       const tidegate_tensor_t* output, const int64_t* counts,
                                       tidegate_request_t* request) {
  return post_collective(comm, request, [&](int rank, int size, CollectiveArgs* args) {
    return tidegate::allgatherv_args(input, output, counts, rank, size, args);
  });
}

tidegate_status_t tidegate_ibroadcast(tidegate_comm_t comm, const tidegate_tensor_t* tensor,
                                      int root, tidegate_request_t* request) {
  return post_collective(comm, request, [&](int, int size, CollectiveArgs* args) {
    return tidegate::broadcast_args(tensor, root, size, args);
  });
}

tidegate_status_t tidegate_ibarrier(tidegate_comm_t comm, tidegate_request_t* request) {
  return post_collective(comm, request, [&](int, int, CollectiveArgs* args) {
    args->kind = tidegate::OpKind::kBarrier;
    return Status::ok();
  });
}

tidegate_status_t tidegate_ialltoallv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const int64_t* send_counts, const int64_t* send_offsets,
                                      const tidegate_tensor_t* output, const int64_t* recv_counts,
                                      const int64_t* recv_offsets, tidegate_request_t* request) {
  return post_collective(comm, request, [&](int, int size, CollectiveArgs* args) {
    return tidegate::alltoallv_args(input, send_counts, send_offsets, output, recv_counts,
                                    recv_offsets, size, args);
  });
}

tidegate_status_t tidegate_allreduce(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const tidegate_tensor_t* output, tidegate_reduce_op_t op) {
  return blocking(
      [&](tidegate_request_t* r) { return tidegate_iallreduce(comm, input, output, op, r); });
}

tidegate_status_t tidegate_reduce_scatter(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                          const tidegate_tensor_t* output,
                                          tidegate_reduce_op_t op) {
  return blocking(
      [&](tidegate_request_t* r) { return tidegate_ireduce_scatter(comm, input, output, op, r); });
}

tidegate_status_t tidegate_allgather(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const tidegate_tensor_t* output) {
  return blocking(
      [&](tidegate_request_t* r) { return tidegate_iallgather(comm, input, output, r); });
}

tidegate_status_t tidegate_allgatherv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output, const int64_t* counts) {
  return blocking(
      [&](tidegate_request_t* r) { return tidegate_iallgatherv(comm, input, output, counts, r); });
}

tidegate_status_t tidegate_broadcast(tidegate_comm_t comm, const tidegate_tensor_t* tensor,
                                     int root) {
  return blocking(
      [&](tidegate_request_t* r) { return tidegate_ibroadcast(comm, tensor, root, r); });
}

tidegate_status_t tidegate_barrier(tidegate_comm_t comm) {
  return blocking([&](tidegate_request_t* r) { return tidegate_ibarrier(comm, r); });
}

tidegate_status_t tidegate_alltoallv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const int64_t* send_counts, const int64_t* send_offsets,
                                     const tidegate_tensor_t* output, const int64_t* recv_counts,
                                     const int64_t* recv_offsets) {
  return blocking([&](tidegate_request_t* r) {
    return tidegate_ialltoallv(comm, input, send_counts, send_offsets, output, recv_counts,
                               recv_offsets, r);
  });
}

}  // extern "C"
