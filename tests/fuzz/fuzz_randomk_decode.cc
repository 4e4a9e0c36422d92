// libFuzzer target: randomk decode and decode_add on arbitrary payloads - random-k (seed-derived
// indices, dense flag). Seeds: corpus/randomk_decode/. See sparse_fuzz_util.h for what is checked.
#include "sparse_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = tidegate::fuzz::make_or_die("randomk:ratio=0.1");
  tidegate::fuzz::fuzz_decode(*codec, data, size, /*matrix=*/false, /*sparse=*/true);
  return 0;
}
