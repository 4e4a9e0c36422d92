// libFuzzer target: powersgd decode and decode_add on arbitrary payloads - PowerSGD (factors and
// dense payloads, shapes from the payload). Seeds: corpus/powersgd_decode/. See sparse_fuzz_util.h
// for what is checked.
#include "sparse_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = tidegate::fuzz::make_or_die("powersgd:rank=2");
  tidegate::fuzz::fuzz_decode(*codec, data, size, /*matrix=*/true, /*sparse=*/false);
  return 0;
}
