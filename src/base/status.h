// Status: the error type used inside the library. A Status is a code plus a message; the
// TG_* macros below add a "file:line" trail at each level an error passes through, so that a
// failure deep in a transport reads like a stack in the final message (as NCCL's checks.h).
// Conversion to exceptions happens only at the C++ and PyTorch edges.
#pragma once

#include <string>
#include <utility>

#include "tidegate/tidegate.h"

namespace tidegate {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(tidegate_status_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == TIDEGATE_OK; }
  explicit operator bool() const { return is_ok(); }
  tidegate_status_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Appends one "at file:line" step to the trail (used by TG_RETURN_IF_ERROR).
  Status&& with_trail(const char* file, int line) &&;
  // Prefixes context ("allreduce op #4: ") to the message, keeping the code.
  Status&& with_context(const std::string& context) &&;

  // "timeout: <message>" - what users see.
  std::string to_string() const;

 private:
  tidegate_status_t code_ = TIDEGATE_OK;
  std::string message_;
};

// Short constructors that read well at call sites.
Status invalid_argument(std::string message);
Status mismatch_error(std::string message);
Status timeout_error(std::string message);
Status peer_failed(std::string message);
Status auth_error(std::string message);
Status protocol_error(std::string message);
Status unsupported(std::string message);
Status aborted_error(std::string message);
Status config_error(std::string message);
Status internal_error(std::string message);
// Wraps errno (captured by the caller right after the failing call) with strerror text.
Status system_error(const std::string& what, int saved_errno);

}  // namespace tidegate

// Evaluate an expression yielding Status; on failure return it with this file:line appended.
#define TG_RETURN_IF_ERROR(expr)                                                          \
  do {                                                                                    \
    ::tidegate::Status tg_status_ = (expr);                                               \
    if (!tg_status_.is_ok()) return std::move(tg_status_).with_trail(__FILE__, __LINE__); \
  } while (0)

// Return an INVALID_ARGUMENT / INTERNAL error unless cond holds.
#define TG_CHECK_ARG(cond, message)                            \
  do {                                                         \
    if (!(cond)) return ::tidegate::invalid_argument(message); \
  } while (0)
#define TG_CHECK_INTERNAL(cond)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      return ::tidegate::internal_error(std::string("invariant failed: " #cond " at ") + \
                                        __FILE__ + ":" + std::to_string(__LINE__));      \
  } while (0)
