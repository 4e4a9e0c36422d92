// Vote counts as bit planes: signsgd's summed payloads (signsgd.cc). For n elements whose
// counts are `width` bits wide, plane b is n bits (packed_bytes(n, 1) bytes, LSB-first as in
// bitpack.h) holding bit b of every element's count; the planes follow one another, plane 0
// first. Bits past element n - 1 in a plane's last byte are zero when written and ignored
// when read.
//
// Why planes and not each count's bits side by side: the summable allreduce adds payloads at
// every owner and decodes the gathered sums on every rank, so these two are its compute. On
// planes, two payloads are added 64 elements at a time by a ripple-carry adder (a few word
// operations per plane), and a count is compared with a constant the same way, with no count
// ever unpacked into a byte and packed again: summing four 1-bit votes of 4 Mi elements went
// from 21 to 3.4 ms on one core, and decoding the sum from 9.7 to 3.5 ms (a one-off timing
// harness around the codec; the end-to-end figures are in bench/RESULTS.md (e)).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tidegate::vote_planes {

// A payload's planes: width planes of plane_bytes(count) bytes each, at data.
struct Planes {
  const uint8_t* data = nullptr;
  int64_t count = 0;
  unsigned width = 0;  // 1..32
};

size_t plane_bytes(int64_t count);
// Bytes of `width` planes of `count` elements.
size_t planes_bytes(int64_t count, unsigned width);

// The lowest element whose count is above `limit`, or -1 when there is none; *value is its
// count.
int64_t first_count_above(const Planes& planes, uint64_t limit, uint64_t* value);

// out (width_out planes of a.count elements) = a + b per element. width_out must hold every
// sum: callers check both counts against their voters first.
void add(const Planes& a, const Planes& b, unsigned width_out, uint8_t* out);

// For the elements [first, first + n) (first a multiple of 64): bit i of `above`
// (packed_bytes(n, 1) bytes) = count of element first + i > threshold, bit i of `equal` =
// count == threshold.
void compare(const Planes& planes, int64_t first, int64_t n, uint64_t threshold, uint8_t* above,
             uint8_t* equal);

}  // namespace tidegate::vote_planes
