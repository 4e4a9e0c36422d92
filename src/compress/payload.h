// The common prefix of every codec payload and the little-endian / bit-packing helpers the
// codecs share. A payload is self-describing: magic, format version, codec id, element count
// and codec parameters, so a decoder can refuse a payload that is not what it expects before it
// reads a byte of data. Everything read from a payload is bounds-checked by PayloadReader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/status.h"
#include "compress/codec.h"

namespace tidegate {

inline constexpr uint16_t kPayloadMagic = 0x4354;  // "TC" little-endian
inline constexpr uint8_t kPayloadVersion = 1;
// magic u16 | version u8 | codec u8 | dtype u8 | flags u8 | reserved u16 | count i64
inline constexpr size_t kPayloadHeaderBytes = 16;

struct PayloadHeader {
  CodecId codec = CodecId::kNone;
  uint8_t dtype = 0;
  uint8_t flags = 0;
  int64_t count = 0;
};

// Sequential little-endian writer into a caller buffer of known capacity. Codecs size their
// buffers with max_payload_bytes(), so overflowing is a bug: put() reports it as INTERNAL.
class PayloadWriter {
 public:
  PayloadWriter(uint8_t* out, size_t capacity) : out_(out), capacity_(capacity) {}
  void header(const PayloadHeader& h);
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!reserve(sizeof(T))) return;
    std::memcpy(out_ + size_, &value, sizeof(T));  // x86-64 and aarch64 Linux are little-endian
    size_ += sizeof(T);
  }
  // Raw bytes (packed bit fields, arrays of floats).
  void bytes(const void* data, size_t n);
  // Space for n bytes to be filled in place (e.g. by a vectorised kernel); nullptr on overflow.
  uint8_t* claim(size_t n);
  size_t size() const { return size_; }
  Status status() const;

 private:
  bool reserve(size_t n);
  uint8_t* out_;
  size_t capacity_;
  size_t size_ = 0;
  bool overflow_ = false;
};

// Sequential bounds-checked reader over an untrusted payload.
class PayloadReader {
 public:
  PayloadReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // Reads and checks the prefix: magic, version, the expected codec, count == expected_count.
  Status header(CodecId expected_codec, int64_t expected_count, PayloadHeader* out);
  template <typename T>
  Status get(T* value) {
    const uint8_t* p = nullptr;
    TG_RETURN_IF_ERROR(take(sizeof(T), &p));
    std::memcpy(value, p, sizeof(T));
    return Status::ok();
  }
  // Borrows the next n bytes (no copy); PROTOCOL error when fewer remain.
  Status take(size_t n, const uint8_t** p);
  size_t remaining() const { return size_ - offset_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// Bytes needed for n values of `bits` bits each, packed LSB-first.
inline size_t packed_bytes(uint64_t n, unsigned bits) {
  return static_cast<size_t>((n * bits + 7) / 8);
}

// Smallest bit width that can hold values in [0, max_value] (at least 1).
inline unsigned bits_for(uint64_t max_value) {
  unsigned bits = 1;
  while (bits < 64 && (max_value >> bits) != 0) ++bits;
  return bits;
}

}  // namespace tidegate
