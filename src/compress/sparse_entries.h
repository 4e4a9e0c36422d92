// Walking a parsed sparse payload's entries in index order, a range at a time, whatever its
// layout (sparse_payload.h): the sum of many payloads (sparse_sum.cc) and the strided regions of
// the sparse reduce-scatter visit every payload block by block this way, so the tensor they
// write is passed over once, in cache-sized blocks, however many payloads feed it.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "compress/bitpack.h"
#include "compress/sparse_payload.h"

namespace tidegate {

class SparseEntryCursor {
 public:
  // `p` must come from parse_sparse_payload (indices ascending and in range, values finite).
  explicit SparseEntryCursor(const ParsedSparsePayload& p)
      : p_(p), reader_(p.where, packed_bytes(static_cast<uint64_t>(p.k), p.index_bits)) {
    if (p_.layout == SparseLayout::kIndices && p_.k > 0) next_ = reader_.get(p_.index_bits);
    if (p_.layout == SparseLayout::kBitmap && p_.count > 0) bits_ = p_.where[0];
  }

  // Calls visit(index, value) for the entries not visited yet whose index is below end, in
  // index order. The dense layout visits every element up to end, its zeros included.
  template <typename Visit>
  void visit_below(int64_t end, Visit&& visit) {
    switch (p_.layout) {
      case SparseLayout::kIndices:
        while (taken_ < p_.k && static_cast<int64_t>(next_) < end) {
          visit(static_cast<int64_t>(next_), value(taken_));
          if (++taken_ < p_.k) next_ = reader_.get(p_.index_bits);
        }
        return;
      case SparseLayout::kBitmap: {
        const int64_t bytes = (p_.count + 7) / 8;
        while (taken_ < p_.k) {
          while (bits_ == 0) {  // the next byte with a bit set, unless it lies past end
            if (byte_ + 1 >= bytes || (byte_ + 1) * 8 >= end) return;
            bits_ = p_.where[++byte_];
          }
          const int64_t index = byte_ * 8 + std::countr_zero(bits_);
          if (index >= end) return;
          visit(index, value(taken_++));
          bits_ &= bits_ - 1;
        }
        return;
      }
      case SparseLayout::kDense:
        for (; taken_ < end && taken_ < p_.count; ++taken_) visit(taken_, value(taken_));
        return;
    }
  }

 private:
  float value(int64_t i) const {
    float v;
    std::memcpy(&v, p_.values + static_cast<size_t>(i) * sizeof(float), sizeof v);
    return v;
  }

  ParsedSparsePayload p_;
  BitReader reader_;
  uint64_t next_ = 0;  // kIndices: the next entry's index
  int64_t taken_ = 0;  // entries visited (kDense: elements)
  int64_t byte_ = 0;   // kBitmap: the byte of the next set bit
  unsigned bits_ = 0;  // kBitmap: that byte's set bits not visited yet
};

}  // namespace tidegate
