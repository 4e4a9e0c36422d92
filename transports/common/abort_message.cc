#include "transports/common/abort_message.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tidegate {

namespace {
constexpr size_t kCodeBytes = sizeof(int32_t);
}  // namespace

std::string encode_abort_message(const Status& status) {
  const int32_t code = static_cast<int32_t>(status.code());
  const std::string& text = status.message();
  std::string message(kCodeBytes + std::min(text.size(), kAbortMessageBytes - kCodeBytes), '\0');
  std::memcpy(message.data(), &code, kCodeBytes);
  std::memcpy(message.data() + kCodeBytes, text.data(), message.size() - kCodeBytes);
  return message;
}

Status decode_abort_message(const char* data, size_t length, int sender) {
  int32_t code = TIDEGATE_ERR_ABORTED;
  std::string text;
  if (length >= kCodeBytes) {
    std::memcpy(&code, data, kCodeBytes);
    text.assign(data + kCodeBytes, length - kCodeBytes);
  }
  if (code < TIDEGATE_ERR_INVALID_ARGUMENT || code > TIDEGATE_ERR_INTERNAL)
    code = TIDEGATE_ERR_ABORTED;
  return Status(static_cast<tidegate_status_t>(code),
                "rank " + std::to_string(sender) + " aborted: " + text);
}

}  // namespace tidegate
