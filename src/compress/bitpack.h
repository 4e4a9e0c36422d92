// Bit packing shared by every codec: n values of b bits each, packed LSB-first into a little-
// endian byte stream. Value i occupies stream bits [i*b, (i+1)*b); stream bit k is bit (k % 8)
// of byte k / 8. The last byte's unused high bits are zero. packed_bytes(n, b) (payload.h) is
// the exact size of the packed form.
//
// Three layers:
//   - pack_bits / unpack_bits: any width 1..32 (uint32_t values) or 1..64 (uint64_t values);
//     general and scalar, for index lists and vote counts.
//   - BitWriter / BitReader: the same stream one value at a time, for encoders that produce
//     values on the fly.
//   - pack_codes / unpack_codes: byte codes of 1..8 bits, the quantisers' hot path. They work on
//     groups of 8 codes (which fill exactly b bytes), so a caller that splits a tensor at
//     multiples of 8 elements can pack the pieces independently (threads, sub-blocks) and get
//     the same bytes. Widths 1, 2, 4 and 8 are byte loops that the compiler vectorises.
//
// Values wider than b bits are masked to their low b bits. Nothing here allocates or checks
// sizes: callers size buffers with packed_bytes() and validate untrusted lengths before
// unpacking (PayloadReader::take).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "compress/payload.h"
#include "compress/simd.h"

namespace tidegate {

inline uint64_t low_bits_mask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// Streams values of 1..64 bits into out (which must hold packed_bytes of everything written).
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  void put(uint64_t value, unsigned bits) {
    if (bits > 32) {  // LSB-first: the low half comes first in the stream
      put32(static_cast<uint32_t>(value), 32);
      put32(static_cast<uint32_t>(value >> 32), bits - 32);
    } else {
      put32(static_cast<uint32_t>(value), bits);
    }
  }
  // Writes the last partial byte (zero-padded). Call once after the last put().
  void finish() {
    if (pending_ > 0) *out_++ = static_cast<uint8_t>(acc_);
    acc_ = 0;
    pending_ = 0;
  }
  // Bytes written so far, counting a partial byte.
  const uint8_t* position() const { return out_; }

 private:
  void put32(uint32_t value, unsigned bits) {
    acc_ |= (uint64_t{value} & low_bits_mask(bits)) << pending_;  // pending_ < 8: fits in 64 bits
    pending_ += bits;
    while (pending_ >= 8) {
      *out_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      pending_ -= 8;
    }
  }
  uint8_t* out_;
  uint64_t acc_ = 0;
  unsigned pending_ = 0;
};

// Reads values of 1..64 bits from a packed stream of `size` bytes. Reading past the end yields
// zero bits rather than touching memory beyond it (callers check lengths first; this is the
// second line of defence).
class BitReader {
 public:
  BitReader(const uint8_t* in, size_t size) : in_(in), end_(in + size) {}
  uint64_t get(unsigned bits) {
    if (bits > 32) {
      const uint64_t low = get32(32);
      return low | (get32(bits - 32) << 32);
    }
    return get32(bits);
  }

 private:
  uint64_t get32(unsigned bits) {
    while (available_ < bits) {
      const uint64_t byte = in_ < end_ ? *in_++ : 0;
      acc_ |= byte << available_;
      available_ += 8;
    }
    const uint64_t value = acc_ & low_bits_mask(bits);
    acc_ >>= bits;
    available_ -= bits;
    return value;
  }
  const uint8_t* in_;
  const uint8_t* end_;
  uint64_t acc_ = 0;
  unsigned available_ = 0;
};

// Packs n values of `bits` (1..32) bits into out[0, packed_bytes(n, bits)).
inline void pack_bits(const uint32_t* values, int64_t n, unsigned bits, uint8_t* out) {
  BitWriter writer(out);
  for (int64_t i = 0; i < n; ++i) writer.put(values[i], bits);
  writer.finish();
}
inline void unpack_bits(const uint8_t* in, int64_t n, unsigned bits, uint32_t* values) {
  BitReader reader(in, packed_bytes(static_cast<uint64_t>(n), bits));
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<uint32_t>(reader.get(bits));
}
// The same for 64-bit values of 1..64 bits (indices of tensors beyond 2^32 elements).
inline void pack_bits(const uint64_t* values, int64_t n, unsigned bits, uint8_t* out) {
  BitWriter writer(out);
  for (int64_t i = 0; i < n; ++i) writer.put(values[i], bits);
  writer.finish();
}
inline void unpack_bits(const uint8_t* in, int64_t n, unsigned bits, uint64_t* values) {
  BitReader reader(in, packed_bytes(static_cast<uint64_t>(n), bits));
  for (int64_t i = 0; i < n; ++i) values[i] = reader.get(bits);
}

namespace bitpack_detail {

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight byte codes (one per byte of x) of BITS bits -> one BITS*8-bit group, LSB-first.
template <unsigned BITS>
inline uint64_t squeeze8(uint64_t x) {
  uint64_t group = 0;
  for (unsigned j = 0; j < 8; ++j) group |= ((x >> (8 * j)) & ((1u << BITS) - 1)) << (j * BITS);
  return group;
}

// Inverse of squeeze8: one group -> eight byte codes.
template <unsigned BITS>
inline uint64_t spread8(uint64_t group) {
  uint64_t x = 0;
  for (unsigned j = 0; j < 8; ++j) x |= ((group >> (j * BITS)) & ((1u << BITS) - 1)) << (8 * j);
  return x;
}

// Widths that divide 8: one output byte per 8 / BITS codes, written as byte loops that GCC
// vectorises (the SWAR forms above do not, for lack of 64-bit vector multiplies and shifts).
template <unsigned BITS>
TG_INLINE void pack_codes_bytewise(const uint8_t* TG_RESTRICT codes, int64_t n,
                                   uint8_t* TG_RESTRICT out) {
  constexpr int kPer = 8 / BITS;
  constexpr unsigned kMask = (1u << BITS) - 1;
  const int64_t whole = n / kPer;
  for (int64_t g = 0; g < whole; ++g) {
    unsigned byte = 0;
    for (int j = 0; j < kPer; ++j) byte |= (codes[kPer * g + j] & kMask) << (BITS * j);
    out[g] = static_cast<uint8_t>(byte);
  }
  if (whole * kPer < n) {
    unsigned byte = 0;
    for (int64_t i = whole * kPer; i < n; ++i)
      byte |= (codes[i] & kMask) << (BITS * (i - whole * kPer));
    out[whole] = static_cast<uint8_t>(byte);
  }
}

template <unsigned BITS>
TG_INLINE void unpack_codes_bytewise(const uint8_t* TG_RESTRICT in, int64_t n,
                                     uint8_t* TG_RESTRICT codes) {
  constexpr int kPer = 8 / BITS;
  constexpr unsigned kMask = (1u << BITS) - 1;
  const int64_t whole = n / kPer;
  for (int64_t g = 0; g < whole; ++g) {
    for (int j = 0; j < kPer; ++j)
      codes[kPer * g + j] = static_cast<uint8_t>((in[g] >> (BITS * j)) & kMask);
  }
  for (int64_t i = whole * kPer; i < n; ++i) {
    codes[i] = static_cast<uint8_t>((in[whole] >> (BITS * (i - whole * kPer))) & kMask);
  }
}

// Other widths: groups of 8 codes squeezed into BITS bytes (scalar, less common widths).
template <unsigned BITS>
TG_INLINE void pack_codes_fixed(const uint8_t* codes, int64_t n, uint8_t* out) {
  if constexpr (8 % BITS == 0 && BITS < 8) {
    pack_codes_bytewise<BITS>(codes, n, out);
    return;
  } else if constexpr (BITS == 8) {
    if (n > 0) std::memcpy(out, codes, static_cast<size_t>(n));
    return;
  }
  const int64_t groups = n / 8;
  for (int64_t g = 0; g < groups; ++g) {
    const uint64_t group = squeeze8<BITS>(load_u64(codes + 8 * g));
    std::memcpy(out + g * BITS, &group, BITS);  // little-endian: the low BITS bytes
  }
  const int64_t rest = n - groups * 8;
  if (rest > 0) {  // a short last group: zero the missing codes, write only the bytes it fills
    uint8_t tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tail, codes + groups * 8, static_cast<size_t>(rest));
    const uint64_t group = squeeze8<BITS>(load_u64(tail));
    std::memcpy(out + groups * BITS, &group, packed_bytes(static_cast<uint64_t>(rest), BITS));
  }
}

template <unsigned BITS>
TG_INLINE void unpack_codes_fixed(const uint8_t* in, int64_t n, uint8_t* codes) {
  if constexpr (8 % BITS == 0 && BITS < 8) {
    unpack_codes_bytewise<BITS>(in, n, codes);
    return;
  } else if constexpr (BITS == 8) {
    if (n > 0) std::memcpy(codes, in, static_cast<size_t>(n));
    return;
  }
  const int64_t groups = n / 8;
  for (int64_t g = 0; g < groups; ++g) {
    uint64_t group = 0;
    std::memcpy(&group, in + g * BITS, BITS);
    const uint64_t x = spread8<BITS>(group);
    std::memcpy(codes + 8 * g, &x, 8);
  }
  const int64_t rest = n - groups * 8;
  if (rest > 0) {
    uint64_t group = 0;
    std::memcpy(&group, in + groups * BITS, packed_bytes(static_cast<uint64_t>(rest), BITS));
    const uint64_t x = spread8<BITS>(group);
    std::memcpy(codes + groups * 8, &x, static_cast<size_t>(rest));
  }
}

}  // namespace bitpack_detail

// Packs n byte codes of `bits` (1..8) bits into out[0, packed_bytes(n, bits)). Always inlined:
// the quantisers call it from their vectorised kernels (simd.h).
TG_INLINE void pack_codes(const uint8_t* codes, int64_t n, unsigned bits, uint8_t* out) {
  using namespace bitpack_detail;
  switch (bits) {
    case 1:
      pack_codes_fixed<1>(codes, n, out);
      break;
    case 2:
      pack_codes_fixed<2>(codes, n, out);
      break;
    case 3:
      pack_codes_fixed<3>(codes, n, out);
      break;
    case 4:
      pack_codes_fixed<4>(codes, n, out);
      break;
    case 5:
      pack_codes_fixed<5>(codes, n, out);
      break;
    case 6:
      pack_codes_fixed<6>(codes, n, out);
      break;
    case 7:
      pack_codes_fixed<7>(codes, n, out);
      break;
    default:
      pack_codes_fixed<8>(codes, n, out);
      break;
  }
}

// Unpacks n byte codes of `bits` (1..8) bits from in[0, packed_bytes(n, bits)).
TG_INLINE void unpack_codes(const uint8_t* in, int64_t n, unsigned bits, uint8_t* codes) {
  using namespace bitpack_detail;
  switch (bits) {
    case 1:
      unpack_codes_fixed<1>(in, n, codes);
      break;
    case 2:
      unpack_codes_fixed<2>(in, n, codes);
      break;
    case 3:
      unpack_codes_fixed<3>(in, n, codes);
      break;
    case 4:
      unpack_codes_fixed<4>(in, n, codes);
      break;
    case 5:
      unpack_codes_fixed<5>(in, n, codes);
      break;
    case 6:
      unpack_codes_fixed<6>(in, n, codes);
      break;
    case 7:
      unpack_codes_fixed<7>(in, n, codes);
      break;
    default:
      unpack_codes_fixed<8>(in, n, codes);
      break;
  }
}

}  // namespace tidegate
