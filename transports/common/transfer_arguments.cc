// The checks every transport's isend and irecv make of their arguments.
#include "transports/common/transfer_arguments.h"

#include <string>

namespace tidegate {

Status check_send_arguments(const WireHeader& header, const void* payload, size_t bytes) {
  TG_CHECK_ARG(header.payload_bytes == bytes,
               "isend: header.payload_bytes (" + std::to_string(header.payload_bytes) +
                   ") differs from the payload size " + std::to_string(bytes));
  TG_CHECK_ARG(payload != nullptr || bytes == 0, "isend: null payload");
  return Status::ok();
}

Status check_recv_arguments(const WireHeader& expected, const void* payload, size_t bytes) {
  TG_CHECK_ARG(expected.payload_bytes <= bytes,
               "irecv: expected.payload_bytes (" + std::to_string(expected.payload_bytes) +
                   ") exceeds the capacity " + std::to_string(bytes));
  TG_CHECK_ARG(payload != nullptr || expected.payload_bytes == 0, "irecv: null payload");
  return Status::ok();
}

}  // namespace tidegate
