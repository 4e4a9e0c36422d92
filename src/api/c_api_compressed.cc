// The C edge of the compressed allreduce and of the compression state (tidegate.h "Compressed
// allreduce"): options checked before anything is sent, the state touched only through local
// ops on the progress thread.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "api/c_api_internal.h"
#include "api/compressed_args.h"
#include "api/tensor_checks.h"

using tidegate::CollectiveArgs;
using tidegate::CompressionState;
using tidegate::Status;

namespace {

tidegate_status_t post_compressed(tidegate_comm_t comm, const tidegate_tensor_t* input,
                                  const tidegate_tensor_t* output, tidegate_reduce_op_t op,
                                  const tidegate_compression_t* compression,
                                  tidegate_request_t* request,
                                  tidegate::Posting posting = tidegate::Posting::kHandle) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    TG_CHECK_ARG(request != nullptr, "request output pointer is NULL");
    CollectiveArgs args;
    TG_RETURN_IF_ERROR(
        tidegate::compressed_allreduce_args(input, output, op, compression, &comm->impl->codecs(),
                                            comm->impl->default_allowed_codecs(), &args));
    return tidegate::c_api_post(comm, std::move(args), request, posting);
  });
}

template <typename Work>
tidegate_status_t run_local(tidegate_comm_t comm, Work&& work) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    return comm->impl->run_local(std::forward<Work>(work));
  });
}

}  // namespace

extern "C" {

tidegate_status_t tidegate_icompressed_allreduce(tidegate_comm_t comm,
                                                 const tidegate_tensor_t* input,
                                                 const tidegate_tensor_t* output,
                                                 tidegate_reduce_op_t op,
                                                 const tidegate_compression_t* compression,
                                                 tidegate_request_t* request) {
  return post_compressed(comm, input, output, op, compression, request);
}

tidegate_status_t tidegate_compressed_allreduce(tidegate_comm_t comm,
                                                const tidegate_tensor_t* input,
                                                const tidegate_tensor_t* output,
                                                tidegate_reduce_op_t op,
                                                const tidegate_compression_t* compression) {
  tidegate_request_t request = nullptr;
  const tidegate_status_t posted =
      post_compressed(comm, input, output, op, compression, &request, tidegate::Posting::kBlocking);
  if (posted != TIDEGATE_OK) return posted;
  return tidegate::c_api_wait_and_free(request);
}

tidegate_status_t tidegate_ef_state_save(tidegate_comm_t comm, void** data, size_t* bytes) {
  if (data == nullptr || bytes == nullptr) {
    return tidegate::c_api_report(tidegate::invalid_argument("data or bytes pointer is NULL"));
  }
  auto saved = std::make_shared<std::vector<uint8_t>>();
  const tidegate_status_t status =
      run_local(comm, [saved](CompressionState& state) { return state.save(saved.get()); });
  if (status != TIDEGATE_OK) return status;
  void* copy = std::malloc(saved->empty() ? 1 : saved->size());
  if (copy == nullptr) {
    return tidegate::c_api_report(Status(TIDEGATE_ERR_NO_MEMORY, "out of memory saving the state"));
  }
  if (!saved->empty()) std::memcpy(copy, saved->data(), saved->size());
  *data = copy;
  *bytes = saved->size();
  return TIDEGATE_OK;
}

tidegate_status_t tidegate_ef_state_load(tidegate_comm_t comm, const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) {
    return tidegate::c_api_report(tidegate::invalid_argument("state buffer is NULL"));
  }
  const auto* begin = static_cast<const uint8_t*>(data);
  auto copy = std::make_shared<std::vector<uint8_t>>(begin, begin + bytes);
  return run_local(
      comm, [copy](CompressionState& state) { return state.load(copy->data(), copy->size()); });
}

tidegate_status_t tidegate_ef_state_reset(tidegate_comm_t comm) {
  return run_local(comm, [](CompressionState& state) {
    state.reset_all();
    return Status::ok();
  });
}

tidegate_status_t tidegate_ef_flush(tidegate_comm_t comm, uint64_t key,
                                    const tidegate_tensor_t* dense, tidegate_reduce_op_t op) {
  tidegate::TensorView view;
  tidegate_status_t checked = tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    TG_CHECK_ARG(op == TIDEGATE_SUM || op == TIDEGATE_AVG, "flush: op must be SUM or AVG");
    return tidegate::check_tensor(dense, "dense", &view);
  });
  if (checked != TIDEGATE_OK) return checked;
  const int averaged_over = op == TIDEGATE_AVG ? comm->impl->size() : 1;
  return run_local(comm, [key, view, averaged_over](CompressionState& state) {
    return state.flush(key, view, averaged_over);
  });
}

void tidegate_free(void* data) { std::free(data); }

tidegate_status_t tidegate_request_bytes_sent(tidegate_request_t request, uint64_t* bytes) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(request != nullptr && bytes != nullptr, "request or bytes pointer is NULL");
    Status status;
    TG_CHECK_ARG(request->impl->test(&status), "the request has not finished yet");
    *bytes = request->impl->bytes_sent();
    return Status::ok();
  });
}

tidegate_status_t tidegate_request_choice(tidegate_request_t request, char* buffer,
                                          size_t capacity) {
  return tidegate::c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(request != nullptr && buffer != nullptr, "request or buffer pointer is NULL");
    Status status;
    TG_CHECK_ARG(request->impl->test(&status), "the request has not finished yet");
    const std::string& choice = request->impl->choice();
    TG_CHECK_ARG(choice.size() < capacity, "the buffer holds " + std::to_string(capacity) +
                                               " bytes; the choice needs " +
                                               std::to_string(choice.size() + 1));
    std::memcpy(buffer, choice.c_str(), choice.size() + 1);
    return Status::ok();
  });
}

}  // extern "C"
