// A payload buffer in the memory a transport moves: host memory, or device memory for a
// transport whose capabilities say it moves device memory only (nccl). Bodies fill and read it
// through host vectors, so the same body runs on either.
#pragma once

#include <cstddef>
#include <vector>

#include "base/transport.h"

namespace tidegate::conformance {

class MessageBuffer {
 public:
  // `bytes` bytes, every one set to `fill`.
  MessageBuffer(const Transport& transport, size_t bytes, unsigned char fill);
  ~MessageBuffer();
  MessageBuffer(const MessageBuffer&) = delete;
  MessageBuffer& operator=(const MessageBuffer&) = delete;

  // What isend/irecv take: nullptr for an empty buffer.
  void* data() { return size_ == 0 ? nullptr : (device_ != nullptr ? device_ : host_.data()); }
  size_t size() const { return size_; }

  // Copies `content` (at most size() bytes) to the start of the buffer.
  void write(const std::vector<unsigned char>& content);
  // The whole buffer as host bytes.
  std::vector<unsigned char> read() const;

 private:
  size_t size_ = 0;
  std::vector<unsigned char> host_;  // the buffer itself in host memory
  void* device_ = nullptr;           // the buffer in device memory
};

}  // namespace tidegate::conformance
