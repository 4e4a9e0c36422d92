// Shared pieces of the C edge (c_api.cc, c_api_collectives.cc): the handle structs and the
// conversion of Status into a code plus the thread-local last-error message.
#pragma once

#include <memory>
#include <new>
#include <stdexcept>

#include "api/communicator.h"
#include "tidegate/tidegate.h"

struct tidegate_comm {
  std::unique_ptr<tidegate::Communicator> impl;
};

struct tidegate_request {
  std::shared_ptr<tidegate::Request> impl;
  int64_t default_timeout_ms = 0;
  // Set for a blocking collective's request only (it never outlives the call): the
  // communicator whose engine the waiting caller may run (Communicator::wait).
  tidegate::Communicator* blocking_comm = nullptr;
};

namespace tidegate {

// Stores the status's message as this thread's last error (or clears it) and returns the code.
tidegate_status_t c_api_report(const Status& status);

// Runs `body` (returning Status), converting exceptions (allocation failures) into codes.
template <typename Body>
tidegate_status_t c_api_guarded(Body&& body) {
  try {
    return c_api_report(body());
  } catch (const std::bad_alloc&) {
    return c_api_report(Status(TIDEGATE_ERR_NO_MEMORY, "out of memory"));
  } catch (const std::exception& e) {
    return c_api_report(internal_error(std::string("unexpected exception: ") + e.what()));
  }
}

// How a request is posted: handed to the caller (i* calls), or waited for at once by the
// blocking wrapper, which may then run the op on its own thread.
enum class Posting { kHandle, kBlocking };

// Posts validated args on comm and returns a new request handle.
Status c_api_post(tidegate_comm_t comm, CollectiveArgs args, tidegate_request_t* request,
                  Posting posting = Posting::kHandle);

// Waits for a request of a blocking wrapper and frees it; returns the collective's code.
tidegate_status_t c_api_wait_and_free(tidegate_request_t request);

}  // namespace tidegate
