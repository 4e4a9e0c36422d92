#include "compress/sign_bits.h"

#include "compress/bitpack.h"
#include "compress/simd.h"
#include "numeric/half.h"

namespace tidegate {

TG_VECTOR_CLONES bool pack_signs(const float* TG_RESTRICT x, int64_t n, uint8_t* packed) {
  uint8_t codes[kSignBlock];
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= (float_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
    codes[i] = x[i] < 0 ? 1 : 0;
  }
  pack_codes(codes, n, 1, packed);
  return bad == 0;
}

namespace {

// The float bits of element j (0..7) of a group whose set bits are the byte `set` and whose tie
// bits are the byte `tie`: `clear` where its bit is clear, `clear ^ flip` where it is set, 0
// where tied. Written per group of 8 elements so that GCC vectorises the loop over j with no
// gather and no staging of one byte per element (2-3x faster than unpack_codes + select).
TG_INLINE uint32_t chosen_bits(uint32_t clear, uint32_t flip, uint32_t set, uint32_t tie, int j) {
  return (clear ^ (flip & (0u - ((set >> j) & 1u)))) & (((tie >> j) & 1u) - 1u);
}

// out[i] = (or +=) the value of chosen_bits for every element; without ties when kTies is
// false (tie is not read). A template, not a null check per group: GCC does not vectorise a
// loop whose load is conditional (3x slower).
template <bool kTies>
TG_INLINE void expand_bits(const uint8_t* TG_RESTRICT set, const uint8_t* TG_RESTRICT tie,
                           int64_t n, float clear, float if_set, float* TG_RESTRICT out, bool add) {
  const uint32_t base = float_bits(clear), flip = float_bits(clear) ^ float_bits(if_set);
  const int64_t groups = n / 8;
  if (add) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint32_t sb = set[g], tb = kTies ? tie[g] : 0u;
      for (int j = 0; j < 8; ++j) out[8 * g + j] += bits_float(chosen_bits(base, flip, sb, tb, j));
    }
  } else {
    for (int64_t g = 0; g < groups; ++g) {
      const uint32_t sb = set[g], tb = kTies ? tie[g] : 0u;
      for (int j = 0; j < 8; ++j) out[8 * g + j] = bits_float(chosen_bits(base, flip, sb, tb, j));
    }
  }
  for (int64_t i = groups * 8; i < n; ++i) {  // a short last group
    const uint32_t sb = set[groups], tb = kTies ? tie[groups] : 0u;
    const float v = bits_float(chosen_bits(base, flip, sb, tb, static_cast<int>(i - groups * 8)));
    out[i] = add ? out[i] + v : v;
  }
}

}  // namespace

TG_VECTOR_CLONES void unpack_signs(const uint8_t* packed, int64_t n, float scale,
                                   float* TG_RESTRICT out, bool add) {
  expand_bits<false>(packed, nullptr, n, scale, -scale, out, add);
}

TG_VECTOR_CLONES void unpack_votes(const uint8_t* negative, const uint8_t* tie, int64_t n,
                                   float* TG_RESTRICT out, bool add) {
  expand_bits<true>(negative, tie, n, 1.0f, -1.0f, out, add);
}

TG_VECTOR_CLONES void unpack_choices(const uint8_t* packed, int64_t n, float clear, float if_set,
                                     float* TG_RESTRICT out, bool add) {
  expand_bits<false>(packed, nullptr, n, clear, if_set, out, add);
}

}  // namespace tidegate
