#include "message_buffer.h"

#include <gtest/gtest.h>

#include "device_memory.h"

namespace tidegate::conformance {

namespace {
bool device_only(const Transport& transport) {
  const TransportCapabilities caps = transport.capabilities();
  return !caps.host_memory && caps.cuda_memory;
}
}  // namespace

MessageBuffer::MessageBuffer(const Transport& transport, size_t bytes, unsigned char fill)
    : size_(bytes) {
  if (!device_only(transport) || bytes == 0) {
    host_.assign(bytes, fill);
    return;
  }
  const std::string error = gpu_alloc(&device_, bytes);
  EXPECT_EQ(error, "") << "device buffer of " << bytes << " bytes";
  if (!error.empty()) {
    device_ = nullptr;
    host_.assign(bytes, fill);  // keeps the body going; the case has failed already
    return;
  }
  write(std::vector<unsigned char>(bytes, fill));
}

MessageBuffer::~MessageBuffer() {
  if (device_ != nullptr) gpu_free(device_);
}

void MessageBuffer::write(const std::vector<unsigned char>& content) {
  ASSERT_LE(content.size(), size_);
  if (content.empty()) return;
  if (device_ == nullptr) {
    std::copy(content.begin(), content.end(), host_.begin());
    return;
  }
  EXPECT_EQ(gpu_write(device_, content.data(), content.size()), "");
}

std::vector<unsigned char> MessageBuffer::read() const {
  if (device_ == nullptr) return host_;
  std::vector<unsigned char> out(size_);
  EXPECT_EQ(gpu_read(out.data(), device_, size_), "");
  return out;
}

}  // namespace tidegate::conformance
