// The C edge: validates the caller's arguments, converts Status into a status code plus the
// thread-local last-error message, and maps opaque handles onto the C++ objects.
#include "api/c_api_internal.h"

namespace tidegate {

namespace {
thread_local std::string t_last_error;
}  // namespace

tidegate_status_t c_api_report(const Status& status) {
  if (status.is_ok()) {
    t_last_error.clear();
  } else {
    t_last_error = status.message();
  }
  return status.code();
}

Status c_api_post(tidegate_comm_t comm, CollectiveArgs args, tidegate_request_t* request,
                  Posting posting) {
  std::shared_ptr<Request> posted;
  const bool blocking = posting == Posting::kBlocking;
  TG_RETURN_IF_ERROR(comm->impl->post(std::move(args), &posted, blocking));
  *request = new tidegate_request{std::move(posted), comm->impl->config().timeout_ms(),
                                  blocking ? comm->impl.get() : nullptr};
  return Status::ok();
}

tidegate_status_t c_api_wait_and_free(tidegate_request_t request) {
  std::unique_ptr<tidegate_request> owned(request);
  // The engine bounds every running collective by its no-progress deadline
  // (TIDEGATE_TIMEOUT_MS) and always completes the request, so this wait needs no deadline
  // of its own: a long collective that keeps making progress is not cut off.
  return c_api_guarded([&] {
    if (owned->blocking_comm != nullptr) return owned->blocking_comm->wait(owned->impl);
    return owned->impl->wait(Deadline(Clock::time_point::max()));
  });
}

}  // namespace tidegate

using tidegate::c_api_guarded;
using tidegate::c_api_report;

extern "C" {

const char* tidegate_last_error(void) { return tidegate::t_last_error.c_str(); }

const char* tidegate_version(void) { return TIDEGATE_VERSION_STRING; }

size_t tidegate_dtype_size(tidegate_dtype_t dtype) { return tidegate::dtype_size(dtype); }

tidegate_status_t tidegate_block_range(int64_t count, int size, int rank, int64_t* offset,
                                       int64_t* length) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(offset != nullptr && length != nullptr, "offset/length pointers are NULL");
    TG_CHECK_ARG(count >= 0, "count is negative");
    TG_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "rank/size out of range");
    tidegate::block_range(count, size, rank, offset, length);
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_create_from_env(tidegate_comm_t* comm) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr, "comm output pointer is NULL");
    std::unique_ptr<tidegate::Communicator> impl;
    TG_RETURN_IF_ERROR(tidegate::create_communicator_from_env(&impl));
    *comm = new tidegate_comm{std::move(impl)};
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_create(int rank, int size, const tidegate_store_t* store,
                                       tidegate_comm_t* comm) {
  return tidegate_comm_create_with_settings(rank, size, store, nullptr, 0, comm);
}

tidegate_status_t tidegate_comm_create_with_settings(int rank, int size,
                                                     const tidegate_store_t* store,
                                                     const tidegate_setting_t* settings,
                                                     size_t num_settings, tidegate_comm_t* comm) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr, "comm output pointer is NULL");
    TG_CHECK_ARG(store != nullptr && store->set != nullptr && store->get != nullptr,
                 "store callbacks are NULL");
    TG_CHECK_ARG(settings != nullptr || num_settings == 0,
                 "settings are NULL but num_settings > 0");
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < num_settings; ++i) {
      TG_CHECK_ARG(settings[i].name != nullptr && settings[i].value != nullptr,
                   "settings[" + std::to_string(i) + "] has a NULL name or value");
      pairs.emplace_back(settings[i].name, settings[i].value);
    }
    std::unique_ptr<tidegate::Communicator> impl;
    TG_RETURN_IF_ERROR(tidegate::create_communicator_with_store(rank, size, *store, pairs, &impl));
    *comm = new tidegate_comm{std::move(impl)};
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_create_from_mpi(const void* mpi_comm, tidegate_comm_t* comm) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr, "comm output pointer is NULL");
    std::unique_ptr<tidegate::Communicator> impl;
    TG_RETURN_IF_ERROR(tidegate::create_communicator_from_mpi(mpi_comm, &impl));
    *comm = new tidegate_comm{std::move(impl)};
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_destroy(tidegate_comm_t comm) {
  if (comm == nullptr) return c_api_report(tidegate::Status::ok());
  std::unique_ptr<tidegate_comm> owned(comm);
  return c_api_guarded([&] { return owned->impl->shutdown(); });
}

tidegate_status_t tidegate_comm_abort(tidegate_comm_t comm, const char* reason) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr, "comm is NULL");
    comm->impl->abort(reason == nullptr ? "" : reason);
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_rank(tidegate_comm_t comm, int* rank) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr && rank != nullptr, "comm or rank pointer is NULL");
    *rank = comm->impl->rank();
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_comm_size(tidegate_comm_t comm, int* size) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(comm != nullptr && size != nullptr, "comm or size pointer is NULL");
    *size = comm->impl->size();
    return tidegate::Status::ok();
  });
}

tidegate_status_t tidegate_request_test(tidegate_request_t request, int* done) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(request != nullptr && done != nullptr, "request or done pointer is NULL");
    tidegate::Status status;
    *done = request->impl->test(&status) ? 1 : 0;
    return status;
  });
}

tidegate_status_t tidegate_request_wait(tidegate_request_t request, int64_t timeout_ms) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(request != nullptr, "request is NULL");
    const int64_t ms = timeout_ms < 0 ? request->default_timeout_ms : timeout_ms;
    return request->impl->wait(tidegate::Deadline::after_ms(ms));
  });
}

tidegate_status_t tidegate_request_on_complete(tidegate_request_t request,
                                               tidegate_request_callback_t callback,
                                               void* user_data) {
  return c_api_guarded([&]() -> tidegate::Status {
    TG_CHECK_ARG(request != nullptr && callback != nullptr, "request or callback is NULL");
    request->impl->on_complete([callback, user_data](const tidegate::Status& status) {
      // The callback may ask for the message on its own thread, as after any tidegate call.
      const tidegate_status_t code = c_api_report(status);
      callback(user_data, code);
    });
    return tidegate::Status::ok();
  });
}

void tidegate_request_free(tidegate_request_t request) { delete request; }

}  // extern "C"
