#include "collectives/compressed/buffer_pool.h"

#include <utility>

namespace tidegate {

PooledBuffer::PooledBuffer(PooledBuffer&& other) noexcept
    : size(std::exchange(other.size, 0)),
      pool_(std::exchange(other.pool_, nullptr)),
      data_(std::move(other.data_)),
      capacity_(std::exchange(other.capacity_, 0)) {}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr && data_) pool_->give(std::move(data_), capacity_);
    size = std::exchange(other.size, 0);
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::move(other.data_);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

PooledBuffer::~PooledBuffer() {
  if (pool_ != nullptr && data_) pool_->give(std::move(data_), capacity_);
}

PooledBuffer BufferPool::take(size_t capacity) {
  PooledBuffer buffer;
  buffer.pool_ = this;
  if (capacity == 0) capacity = 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(capacity);
    if (it != free_.end() && it->first <= 2 * capacity) {
      buffer.capacity_ = it->first;
      buffer.data_ = std::move(it->second);
      free_bytes_ -= it->first;
      free_.erase(it);
      return buffer;
    }
  }
  buffer.capacity_ = capacity;
  buffer.data_.reset(new uint8_t[capacity]);  // not zeroed: every user writes before it reads
  return buffer;
}

void BufferPool::give(std::unique_ptr<uint8_t[]> data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Over the cap, the largest free buffers go first: they are the rarest to fit again.
  free_.emplace(capacity, std::move(data));
  free_bytes_ += capacity;
  while (free_bytes_ > kMaxFreeBytes && !free_.empty()) {
    auto largest = std::prev(free_.end());
    free_bytes_ -= largest->first;
    free_.erase(largest);
  }
}

size_t BufferPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_bytes_;
}

}  // namespace tidegate
