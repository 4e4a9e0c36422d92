// Buffers reused between compressed ops. A compressed allreduce of a large tensor needs tens of
// MiB of payload and scratch buffers per op; fresh ones cost a page fault per 4 KiB and the
// kernel's zeroing on every op (measured: about a tenth of a 64 MiB SRA's time on one core).
// A pool per communicator hands the same memory back op after op, uninitialised.
//
// Thread-safe (a mutex): tasks take and return buffers on the progress thread, but a task may
// also be destroyed by the thread that tears the engine down.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace tidegate {

class BufferPool;

// A byte buffer of a fixed capacity from a pool (or standalone); returns itself on destruction.
// `size` is the caller's record of how much of it holds data.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(PooledBuffer&& other) noexcept;
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer();

  uint8_t* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  float* floats() const { return reinterpret_cast<float*>(data_.get()); }
  size_t size = 0;

 private:
  friend class BufferPool;
  BufferPool* pool_ = nullptr;
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0;
};

class BufferPool {
 public:
  // A buffer of at least `capacity` bytes (contents undefined): a free one no more than twice
  // as large when there is one, else a new one.
  PooledBuffer take(size_t capacity);
  // Floats: take(n * sizeof(float)).
  PooledBuffer take_floats(int64_t n) { return take(static_cast<size_t>(n) * sizeof(float)); }

  size_t free_bytes() const;

 private:
  friend class PooledBuffer;
  void give(std::unique_ptr<uint8_t[]> data, size_t capacity);

  // Free memory kept at most: enough for the buffers of a few large ops.
  static constexpr size_t kMaxFreeBytes = size_t{2} << 30;

  mutable std::mutex mutex_;
  std::multimap<size_t, std::unique_ptr<uint8_t[]>> free_;
  size_t free_bytes_ = 0;
};

}  // namespace tidegate
