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
tidegate_status_t post_collective(tidegate_comm_t comm, tidegate_request_t* request, Build&& build,
                                  tidegate::Posting posting = tidegate::Posting::kHandle) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    TG_CHECK_ARG(request != nullptr, "request output pointer is NULL");
    CollectiveArgs args;
    TG_RETURN_IF_ERROR(build(comm->impl->rank(), comm->impl->size(), &args));
    return tidegate::c_api_post(comm, std::move(args), request, posting);
  });
}

// Validates and posts as the i* call does, then waits for and frees the request; the wait may
// run the op on this thread (Posting::kBlocking).
template <typename Build>
tidegate_status_t blocking(tidegate_comm_t comm, Build&& build) {
  tidegate_request_t request = nullptr;
  tidegate_status_t posted =
      post_collective(comm, &request, std::forward<Build>(build), tidegate::Posting::kBlocking);
  if (posted != TIDEGATE_OK) return posted;
  return tidegate::c_api_wait_and_free(request);
}

// The argument builders, shared by each i* call and its blocking form.
auto allreduce_of(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                  tidegate_reduce_op_t op) {
  return [=](int, int, CollectiveArgs* args) {
    return tidegate::allreduce_args(input, output, op, args);
  };
}
auto reduce_scatter_of(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                       tidegate_reduce_op_t op) {
  return [=](int rank, int size, CollectiveArgs* args) {
    return tidegate::reduce_scatter_args(input, output, op, rank, size, args);
  };
}
auto allgather_of(const tidegate_tensor_t* input, const tidegate_tensor_t* output) {
  return [=](int, int size, CollectiveArgs* args) {
    return tidegate::allgather_args(input, output, size, args);
  };
}
auto allgatherv_of(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                   const int64_t* counts) {
  return [=](int rank, int size, CollectiveArgs* args) {
    return tidegate::allgatherv_args(input, output, counts, rank, size, args);
  };
}
auto broadcast_of(const tidegate_tensor_t* tensor, int root) {
  return [=](int, int size, CollectiveArgs* args) {
    return tidegate::broadcast_args(tensor, root, size, args);
  };
}
auto barrier_of() {
  return [](int, int, CollectiveArgs* args) {
    args->kind = tidegate::OpKind::kBarrier;
    return Status::ok();
  };
}
auto alltoallv_of(const tidegate_tensor_t* input, const int64_t* send_counts,
                  const int64_t* send_offsets, const tidegate_tensor_t* output,
                  const int64_t* recv_counts, const int64_t* recv_offsets) {
  return [=](int, int size, CollectiveArgs* args) {
    return tidegate::alltoallv_args(input, send_counts, send_offsets, output, recv_counts,
                                    recv_offsets, size, args);
  };
}

}  // namespace

extern "C" {

tidegate_status_t tidegate_iallreduce(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                                      tidegate_request_t* request) {
  return post_collective(comm, request, allreduce_of(input, output, op));
}

tidegate_status_t tidegate_ireduce_scatter(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                           const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                                           tidegate_request_t* request) {
  return post_collective(comm, request, reduce_scatter_of(input, output, op));
}

tidegate_status_t tidegate_iallgather(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output,
                                      tidegate_request_t* request) {
  return post_collective(comm, request, allgather_of(input, output));
}

tidegate_status_t tidegate_iallgatherv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                       const tidegate_tensor_t* output, const int64_t* counts,
                                       tidegate_request_t* request) {
  return post_collective(comm, request, allgatherv_of(input, output, counts));
}

tidegate_status_t tidegate_ibroadcast(tidegate_comm_t comm, const tidegate_tensor_t* tensor,
                                      int root, tidegate_request_t* request) {
  return post_collective(comm, request, broadcast_of(tensor, root));
}

tidegate_status_t tidegate_ibarrier(tidegate_comm_t comm, tidegate_request_t* request) {
  return post_collective(comm, request, barrier_of());
}

tidegate_status_t tidegate_ialltoallv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const int64_t* send_counts, const int64_t* send_offsets,
                                      const tidegate_tensor_t* output, const int64_t* recv_counts,
                                      const int64_t* recv_offsets, tidegate_request_t* request) {
  return post_collective(
      comm, request,
      alltoallv_of(input, send_counts, send_offsets, output, recv_counts, recv_offsets));
}

tidegate_status_t tidegate_allreduce(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const tidegate_tensor_t* output, tidegate_reduce_op_t op) {
  return blocking(comm, allreduce_of(input, output, op));
}

tidegate_status_t tidegate_reduce_scatter(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                          const tidegate_tensor_t* output,
                                          tidegate_reduce_op_t op) {
  return blocking(comm, reduce_scatter_of(input, output, op));
}

tidegate_status_t tidegate_allgather(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const tidegate_tensor_t* output) {
  return blocking(comm, allgather_of(input, output));
}

tidegate_status_t tidegate_allgatherv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                      const tidegate_tensor_t* output, const int64_t* counts) {
  return blocking(comm, allgatherv_of(input, output, counts));
}

tidegate_status_t tidegate_broadcast(tidegate_comm_t comm, const tidegate_tensor_t* tensor,
                                     int root) {
  return blocking(comm, broadcast_of(tensor, root));
}

tidegate_status_t tidegate_barrier(tidegate_comm_t comm) { return blocking(comm, barrier_of()); }

tidegate_status_t tidegate_alltoallv(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                     const int64_t* send_counts, const int64_t* send_offsets,
                                     const tidegate_tensor_t* output, const int64_t* recv_counts,
                                     const int64_t* recv_offsets) {
  return blocking(
      comm, alltoallv_of(input, send_counts, send_offsets, output, recv_counts, recv_offsets));
}

}  // extern "C"
