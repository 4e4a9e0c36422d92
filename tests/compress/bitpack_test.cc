// bitpack.h against a bit-by-bit reference: every width, lengths around group boundaries, and
// pieces packed separately at multiples of 8 giving the same bytes as one call.
#include <gtest/gtest.h>

#include <vector>

#include "compress/bitpack.h"
#include "quantiser_test_util.h"

namespace tidegate {
namespace {

using qtest::RefBits;
using qtest::splitmix;

TEST(BitPack, WideValuesMatchTheReferenceForEveryWidth) {
  for (unsigned bits = 1; bits <= 32; ++bits) {
    for (int64_t n : {0, 1, 7, 8, 9, 31, 100}) {
      std::vector<uint32_t> values(static_cast<size_t>(n));
      RefBits ref;
      for (int64_t i = 0; i < n; ++i) {
        values[static_cast<size_t>(i)] =
            static_cast<uint32_t>(splitmix(static_cast<uint64_t>(i * 131 + bits)));
        ref.put(values[static_cast<size_t>(i)], bits);  // high bits beyond `bits` must be ignored
      }
      std::vector<uint8_t> packed(packed_bytes(static_cast<uint64_t>(n), bits) + 4, 0xee);
      pack_bits(values.data(), n, bits, packed.data());
      ASSERT_EQ(std::vector<uint8_t>(packed.begin(), packed.end() - 4), ref.bytes)
          << bits << " bits, n=" << n;
      EXPECT_EQ(packed.back(), 0xee) << "wrote past packed_bytes";
      std::vector<uint32_t> back(static_cast<size_t>(n));
      unpack_bits(packed.data(), n, bits, back.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(back[static_cast<size_t>(i)],
                  values[static_cast<size_t>(i)] & low_bits_mask(bits));
      }
    }
  }
}

TEST(BitPack, SixtyFourBitValuesRoundTrip) {
  for (unsigned bits : {1u, 31u, 32u, 33u, 40u, 63u, 64u}) {
    std::vector<uint64_t> values(37);
    RefBits ref;
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = splitmix(i + 1000 * bits);
      ref.put(values[i], bits);
    }
    std::vector<uint8_t> packed(packed_bytes(values.size(), bits));
    pack_bits(values.data(), static_cast<int64_t>(values.size()), bits, packed.data());
    ASSERT_EQ(packed, ref.bytes) << bits;
    std::vector<uint64_t> back(values.size());
    unpack_bits(packed.data(), static_cast<int64_t>(values.size()), bits, back.data());
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(back[i], values[i] & low_bits_mask(bits)) << bits;
  }
}

TEST(BitPack, ByteCodesMatchTheReferenceAndSplitAtMultiplesOfEight) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {0, 1, 2, 3, 5, 8, 13, 16, 63, 64, 65, 1000}) {
      std::vector<uint8_t> codes(static_cast<size_t>(n));
      RefBits ref;
      for (int64_t i = 0; i < n; ++i) {
        codes[static_cast<size_t>(i)] =
            static_cast<uint8_t>(splitmix(static_cast<uint64_t>(i) ^ (bits << 20)));
        ref.put(codes[static_cast<size_t>(i)], bits);
      }
      std::vector<uint8_t> packed(packed_bytes(static_cast<uint64_t>(n), bits) + 3, 0xee);
      pack_codes(codes.data(), n, bits, packed.data());
      ASSERT_EQ(std::vector<uint8_t>(packed.begin(), packed.end() - 3), ref.bytes)
          << bits << " bits, n=" << n;
      ASSERT_EQ(packed.back(), 0xee);
      // Two pieces split at a multiple of 8 pack to the same bytes.
      const int64_t split = n / 16 * 8;
      std::vector<uint8_t> pieces(packed_bytes(static_cast<uint64_t>(n), bits), 0);
      pack_codes(codes.data(), split, bits, pieces.data());
      pack_codes(codes.data() + split, n - split, bits, pieces.data() + split / 8 * bits);
      ASSERT_EQ(pieces, ref.bytes) << bits << " bits, n=" << n;
      std::vector<uint8_t> back(static_cast<size_t>(n) + 1, 0xee);
      unpack_codes(packed.data(), n, bits, back.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(back[static_cast<size_t>(i)], codes[static_cast<size_t>(i)] & low_bits_mask(bits))
            << bits;
      }
      ASSERT_EQ(back.back(), 0xee) << "unpack wrote past n";
    }
  }
}

TEST(BitPack, ReaderYieldsZerosPastTheEnd) {
  const uint8_t one = 0xff;
  BitReader reader(&one, 1);
  EXPECT_EQ(reader.get(4), 0xfu);
  EXPECT_EQ(reader.get(8), 0xfu);  // 4 real bits, then zeros
  EXPECT_EQ(reader.get(32), 0u);
}

TEST(BitPack, WidthHelpers) {
  EXPECT_EQ(bits_for(0), 1u);
  EXPECT_EQ(bits_for(1), 1u);
  EXPECT_EQ(bits_for(2), 2u);
  EXPECT_EQ(bits_for((uint64_t{1} << 31)), 32u);
  EXPECT_EQ(bits_for(~uint64_t{0}), 64u);
  EXPECT_EQ(packed_bytes(uint64_t{1} << 33, 1), size_t{1} << 30);
  EXPECT_EQ(packed_bytes(3, 3), 2u);
}

}  // namespace
}  // namespace tidegate
