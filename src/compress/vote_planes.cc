#include "compress/vote_planes.h"

#include <cstring>

#include "compress/payload.h"

namespace tidegate::vote_planes {

namespace {

// The elements of word k (64 elements) that exist.
uint64_t valid_mask(int64_t count, int64_t word) {
  const int64_t left = count - word * 64;
  return left >= 64 ? ~uint64_t{0} : (uint64_t{1} << left) - 1;
}

// Word k of a plane of `bytes` bytes, zero past its end, masked to the elements that exist.
uint64_t load_word(const uint8_t* plane, size_t bytes, int64_t word, uint64_t mask) {
  const size_t at = static_cast<size_t>(word) * 8;
  uint64_t value = 0;
  std::memcpy(&value, plane + at, bytes - at >= 8 ? 8 : bytes - at);  // little-endian host
  return value & mask;
}

void store_word(uint8_t* plane, size_t bytes, int64_t word, uint64_t value) {
  const size_t at = static_cast<size_t>(word) * 8;
  std::memcpy(plane + at, &value, bytes - at >= 8 ? 8 : bytes - at);
}

// Bit-sliced comparison of the counts in one word with a constant, from the top plane down.
void compare_word(const Planes& p, size_t bytes, int64_t word, uint64_t threshold, uint64_t* above,
                  uint64_t* equal) {
  const uint64_t mask = valid_mask(p.count, word);
  uint64_t gt = 0, eq = mask;
  // Bits of the threshold above the planes: a count of `width` bits is below it.
  if (p.width < 64 && (threshold >> p.width) != 0) eq = 0;
  for (unsigned b = p.width; b-- > 0;) {
    const uint64_t bit = load_word(p.data + b * bytes, bytes, word, mask);
    if ((threshold >> b) & 1) {
      eq &= bit;
    } else {
      gt |= eq & bit;
      eq &= ~bit;
    }
  }
  *above = gt;
  *equal = eq;
}

uint64_t count_of(const Planes& p, size_t bytes, int64_t element) {
  uint64_t value = 0;
  for (unsigned b = 0; b < p.width; ++b) {
    const uint8_t byte = p.data[b * bytes + static_cast<size_t>(element / 8)];
    value |= uint64_t{(byte >> (element % 8)) & 1u} << b;
  }
  return value;
}

}  // namespace

size_t plane_bytes(int64_t count) { return packed_bytes(static_cast<uint64_t>(count), 1); }

size_t planes_bytes(int64_t count, unsigned width) { return plane_bytes(count) * width; }

int64_t first_count_above(const Planes& planes, uint64_t limit, uint64_t* value) {
  if (planes.width < 64 && (limit >> planes.width) != 0) return -1;  // no count reaches it
  const size_t bytes = plane_bytes(planes.count);
  const int64_t words = (planes.count + 63) / 64;
  for (int64_t w = 0; w < words; ++w) {
    uint64_t above = 0, equal = 0;
    compare_word(planes, bytes, w, limit, &above, &equal);
    if (above != 0) {
      const int64_t element = w * 64 + __builtin_ctzll(above);
      *value = count_of(planes, bytes, element);
      return element;
    }
  }
  return -1;
}

void add(const Planes& a, const Planes& b, unsigned width_out, uint8_t* out) {
  const size_t bytes = plane_bytes(a.count);
  const int64_t words = (a.count + 63) / 64;
  for (int64_t w = 0; w < words; ++w) {
    const uint64_t mask = valid_mask(a.count, w);
    uint64_t carry = 0;
    for (unsigned bit = 0; bit < width_out; ++bit) {
      const uint64_t x = bit < a.width ? load_word(a.data + bit * bytes, bytes, w, mask) : 0;
      const uint64_t y = bit < b.width ? load_word(b.data + bit * bytes, bytes, w, mask) : 0;
      store_word(out + bit * bytes, bytes, w, x ^ y ^ carry);
      carry = (x & y) | (carry & (x ^ y));
    }
  }
}

void compare(const Planes& planes, int64_t first, int64_t n, uint64_t threshold, uint8_t* above,
             uint8_t* equal) {
  const size_t bytes = plane_bytes(planes.count);
  const size_t out_bytes = plane_bytes(n);
  for (int64_t w = 0; w * 64 < n; ++w) {
    uint64_t gt = 0, eq = 0;
    compare_word(planes, bytes, first / 64 + w, threshold, &gt, &eq);
    store_word(above, out_bytes, w, gt);
    store_word(equal, out_bytes, w, eq);
  }
}

}  // namespace tidegate::vote_planes
