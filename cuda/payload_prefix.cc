#include "cuda/payload_prefix.h"

#include <cstring>

#include "compress/codec.h"
#include "compress/payload.h"

namespace tidegate::cuda {

static_assert(kFp16Id == static_cast<uint8_t>(CodecId::kFp16) &&
              kBf16Id == static_cast<uint8_t>(CodecId::kBf16) &&
              kQsgdId == static_cast<uint8_t>(CodecId::kQsgd) &&
              kMaxMinId == static_cast<uint8_t>(CodecId::kMaxMin) &&
              kTernGradId == static_cast<uint8_t>(CodecId::kTernGrad) &&
              kSignSgdId == static_cast<uint8_t>(CodecId::kSignSgd) &&
              kEfSignId == static_cast<uint8_t>(CodecId::kEfSign) &&
              kOneBitId == static_cast<uint8_t>(CodecId::kOneBit));
static_assert(kPayloadHeaderBytes == 16, "the kernels write the prefix as 64-bit words");

PayloadPrefix payload_prefix(uint8_t codec, int64_t n, const uint8_t* params, size_t param_bytes) {
  uint8_t bytes[24] = {};
  PayloadWriter writer(bytes, sizeof bytes);
  writer.header({static_cast<CodecId>(codec), static_cast<uint8_t>(TIDEGATE_FLOAT32), 0, n});
  if (param_bytes > 0) writer.bytes(params, param_bytes);
  PayloadPrefix prefix;
  prefix.words = static_cast<int>(writer.size() / 8);
  std::memcpy(prefix.word, bytes, sizeof prefix.word);
  return prefix;
}

}  // namespace tidegate::cuda
