// libFuzzer target: qsgd decode and decode_add on arbitrary payloads (qsgd:bits=4,bucket=64).
// Seeds: corpus/qsgd_decode/. See quant_fuzz_util.h for what is checked.
#include "quant_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = tidegate::fuzz::quant_codec_or_die("qsgd:bits=4,bucket=64");
  tidegate::fuzz::fuzz_quantiser_decode(*codec, data, size, /*raw=*/false);
  return 0;
}
