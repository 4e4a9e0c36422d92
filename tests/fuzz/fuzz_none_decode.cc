// libFuzzer target: none decode and decode_add on arbitrary payloads (none).
// Seeds: corpus/none_decode/. See quant_fuzz_util.h for what is checked.
#include "quant_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = tidegate::fuzz::quant_codec_or_die("none");
  tidegate::fuzz::fuzz_quantiser_decode(*codec, data, size, /*raw=*/true);
  return 0;
}
