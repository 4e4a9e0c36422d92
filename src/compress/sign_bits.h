// Sign bits shared by signsgd and efsign: one bit per element, 1 = negative (x < 0, so -0 and
// +0 both count as positive), packed LSB-first by pack_codes (bitpack.h). Both codecs work in
// blocks of at most kSignBlock elements so the unpacked codes fit on the stack.
#pragma once

#include <cstdint>

namespace tidegate {

inline constexpr int64_t kSignBlock = 4096;

// Packs the sign bits of x[0, n), n <= kSignBlock, into packed (n bits). Returns false when
// some element is NaN or infinite (the bits are written regardless).
bool pack_signs(const float* x, int64_t n, uint8_t* packed);

// out[i] = (or +=, when add) -scale for a set bit, +scale for a clear one; n <= kSignBlock.
void unpack_signs(const uint8_t* packed, int64_t n, float scale, float* out, bool add);

// out[i] = (or +=, when add) if_set for a set bit, clear for a clear one; n <= kSignBlock.
void unpack_choices(const uint8_t* packed, int64_t n, float clear, float if_set, float* out,
                    bool add);

// A majority vote per element from two bit masks (n bits each, n <= kSignBlock): out[i] = (or
// +=, when add) 0 where bit i of `tie` is set, else -1 where bit i of `negative` is, else +1.
void unpack_votes(const uint8_t* negative, const uint8_t* tie, int64_t n, float* out, bool add);

}  // namespace tidegate
