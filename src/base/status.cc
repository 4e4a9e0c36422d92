#include "base/status.h"

#include <cstring>

namespace tidegate {

namespace {
// Paths in the trail are shortened to start at "src/" or "transports/" for readability.
const char* short_path(const char* file) {
  for (const char* marker : {"/src/", "/transports/", "/bench/", "/integrations/"}) {
    const char* found = std::strstr(file, marker);
    if (found != nullptr) return found + 1;
  }
  return file;
}
}  // namespace

Status&& Status::with_trail(const char* file, int line) && {
  message_ += "\n    at ";
  message_ += short_path(file);
  message_ += ":";
  message_ += std::to_string(line);
  return std::move(*this);
}

Status&& Status::with_context(const std::string& context) && {
  message_ = context + message_;
  return std::move(*this);
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(tidegate_status_string(code_)) + ": " + message_;
}

Status invalid_argument(std::string m) { return {TIDEGATE_ERR_INVALID_ARGUMENT, std::move(m)}; }
Status mismatch_error(std::string m) { return {TIDEGATE_ERR_MISMATCH, std::move(m)}; }
Status timeout_error(std::string m) { return {TIDEGATE_ERR_TIMEOUT, std::move(m)}; }
Status peer_failed(std::string m) { return {TIDEGATE_ERR_PEER_FAILED, std::move(m)}; }
Status auth_error(std::string m) { return {TIDEGATE_ERR_AUTH, std::move(m)}; }
Status protocol_error(std::string m) { return {TIDEGATE_ERR_PROTOCOL, std::move(m)}; }
Status unsupported(std::string m) { return {TIDEGATE_ERR_UNSUPPORTED, std::move(m)}; }
Status aborted_error(std::string m) { return {TIDEGATE_ERR_ABORTED, std::move(m)}; }
Status config_error(std::string m) { return {TIDEGATE_ERR_CONFIG, std::move(m)}; }
Status internal_error(std::string m) { return {TIDEGATE_ERR_INTERNAL, std::move(m)}; }

Status system_error(const std::string& what, int saved_errno) {
  char buffer[256];
  // GNU strerror_r returns the message pointer (possibly not buffer).
  const char* text = strerror_r(saved_errno, buffer, sizeof buffer);
  return {TIDEGATE_ERR_SYSTEM, what + ": " + text + " (errno " + std::to_string(saved_errno) + ")"};
}

}  // namespace tidegate

extern "C" const char* tidegate_status_string(tidegate_status_t status) {
  switch (status) {
    case TIDEGATE_OK:
      return "ok";
    case TIDEGATE_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case TIDEGATE_ERR_MISMATCH:
      return "mismatch between ranks";
    case TIDEGATE_ERR_TIMEOUT:
      return "timeout";
    case TIDEGATE_ERR_PEER_FAILED:
      return "peer failed";
    case TIDEGATE_ERR_AUTH:
      return "authentication failed";
    case TIDEGATE_ERR_PROTOCOL:
      return "protocol error";
    case TIDEGATE_ERR_UNSUPPORTED:
      return "unsupported";
    case TIDEGATE_ERR_NO_MEMORY:
      return "out of memory";
    case TIDEGATE_ERR_ABORTED:
      return "aborted";
    case TIDEGATE_ERR_SYSTEM:
      return "system error";
    case TIDEGATE_ERR_CONFIG:
      return "configuration error";
    case TIDEGATE_ERR_INTERNAL:
      return "internal error";
    case TIDEGATE_IN_PROGRESS:
      return "in progress";
  }
  return "unknown status";
}
