// The C edge of the gradient session (tidegate.h "Gradient session").
#include <memory>

#include "api/c_api_internal.h"
#include "api/gradient_session.h"

struct tidegate_session {
  std::unique_ptr<tidegate::GradientSession> impl;
};

using tidegate::c_api_guarded;
using tidegate::Status;

namespace {

template <typename Body>
tidegate_status_t with_session(tidegate_session_t session, Body&& body) {
  return c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(session != nullptr && session->impl != nullptr, "session is NULL");
    return body(*session->impl);
  });
}

}  // namespace

extern "C" {

tidegate_status_t tidegate_session_create(tidegate_comm_t comm,
                                          const tidegate_gradient_t* gradients, int64_t count,
                                          const tidegate_session_options_t* options,
                                          tidegate_session_t* session) {
  return c_api_guarded([&]() -> Status {
    TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
    TG_CHECK_ARG(session != nullptr, "session output pointer is NULL");
    std::unique_ptr<tidegate::GradientSession> impl;
    TG_RETURN_IF_ERROR(
        tidegate::GradientSession::create(comm->impl.get(), gradients, count, options, &impl));
    *session = new tidegate_session{std::move(impl)};
    return Status::ok();
  });
}

tidegate_status_t tidegate_session_ready(tidegate_session_t session, uint64_t key) {
  return with_session(session, [&](tidegate::GradientSession& s) { return s.ready(key); });
}

tidegate_status_t tidegate_session_wait(tidegate_session_t session, uint64_t key,
                                        int64_t timeout_ms) {
  return with_session(session,
                      [&](tidegate::GradientSession& s) { return s.wait(key, timeout_ms); });
}

tidegate_status_t tidegate_session_wait_all(tidegate_session_t session, int64_t timeout_ms) {
  return with_session(session,
                      [&](tidegate::GradientSession& s) { return s.wait_all(timeout_ms); });
}

tidegate_status_t tidegate_session_step(tidegate_session_t session,
                                        tidegate_session_stats_t* stats) {
  return with_session(session, [&](tidegate::GradientSession& s) { return s.step(stats); });
}

tidegate_status_t tidegate_session_options_used(tidegate_session_t session,
                                                tidegate_session_options_t* options) {
  return with_session(session, [&](tidegate::GradientSession& s) -> Status {
    TG_CHECK_ARG(options != nullptr, "options output pointer is NULL");
    *options = s.options_used();
    return Status::ok();
  });
}

tidegate_status_t tidegate_session_destroy(tidegate_session_t session) {
  if (session == nullptr) return tidegate::c_api_report(Status::ok());
  return c_api_guarded([&]() -> Status {
    delete session;
    return Status::ok();
  });
}

}  // extern "C"
