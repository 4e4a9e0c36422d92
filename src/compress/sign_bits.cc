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

TG_VECTOR_CLONES void unpack_signs(const uint8_t* packed, int64_t n, float scale,
                                   float* TG_RESTRICT out, bool add) {
  uint8_t codes[kSignBlock];
  unpack_codes(packed, n, 1, codes);
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] += codes[i] ? -scale : scale;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = codes[i] ? -scale : scale;
  }
}

}  // namespace tidegate
