// How a ring pass cuts a tensor: one block per rank, each block cut into the same number of
// segments of at most TIDEGATE_SEGMENT_BYTES, so that the reduction (or forwarding) of
// segment k overlaps the transfer of segment k+1. Every rank derives the same layout from the
// same arguments, which is what lets both ends of a message agree on its size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/types.h"

namespace tidegate {

struct RingLayout {
  std::vector<int64_t> block_offset;  // element offset of each rank's block
  std::vector<int64_t> block_length;  // element count of each rank's block
  int64_t segments = 1;               // per block; at least 1, so that even an empty op
                                      // exchanges headers (and detects count mismatches)
  int64_t max_segment = 0;            // longest segment of any block, in elements

  int size() const { return static_cast<int>(block_offset.size()); }

  // Segment k of block b as an absolute element range [*offset, *offset + *length).
  void segment(int b, int64_t k, int64_t* offset, int64_t* length) const {
    int64_t inner = 0;
    block_range(block_length[b], static_cast<int>(segments), static_cast<int>(k), &inner, length);
    *offset = block_offset[b] + inner;
  }

  // Blocks from per-rank lengths (allgatherv, and the block split of reduce-scatter).
  static RingLayout from_lengths(const std::vector<int64_t>& lengths, size_t element_size,
                                 int64_t segment_bytes) {
    RingLayout layout;
    int64_t offset = 0;
    int64_t longest = 0;
    for (int64_t length : lengths) {
      layout.block_offset.push_back(offset);
      layout.block_length.push_back(length);
      offset += length;
      longest = std::max(longest, length);
    }
    const int64_t per_segment =
        std::max<int64_t>(1, segment_bytes / static_cast<int64_t>(element_size));
    // Segment indices travel in 32-bit chunk fields and block_range takes an int.
    layout.segments =
        std::clamp<int64_t>((longest + per_segment - 1) / per_segment, 1, int64_t{1} << 30);
    layout.max_segment = (longest + layout.segments - 1) / layout.segments;
    return layout;
  }

  // Blocks as reduce_scatter splits `count` elements (block_range of types.h).
  static RingLayout even(int64_t count, int size, size_t element_size, int64_t segment_bytes) {
    std::vector<int64_t> lengths(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      int64_t offset = 0;
      block_range(count, size, r, &offset, &lengths[static_cast<size_t>(r)]);
    }
    return from_lengths(lengths, element_size, segment_bytes);
  }
};

// (a mod n) for possibly negative a.
inline int ring_mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

}  // namespace tidegate
