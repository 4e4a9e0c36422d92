// libFuzzer target: signsgd decode and decode_add on arbitrary payloads (signsgd).
// Seeds: corpus/signsgd_decode/. See quant_fuzz_util.h for what is checked.
#include "quant_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = tidegate::fuzz::quant_codec_or_die("signsgd");
  tidegate::fuzz::fuzz_quantiser_decode(*codec, data, size, /*raw=*/false);
  return 0;
}
