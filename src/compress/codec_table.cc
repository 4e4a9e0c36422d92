// The codec registry, generated from codec_list.inc so that adding a codec is one line there.
#include "compress/codec_spec.h"

namespace tidegate {

#define TIDEGATE_CODEC(name, factory) \
  Status factory(CodecParams& params, std::unique_ptr<Codec>* codec);
#include "compress/codec_list.inc"
#undef TIDEGATE_CODEC

namespace {
const CodecTableEntry kCodecTable[] = {
#define TIDEGATE_CODEC(name, factory) {#name, &factory},
#include "compress/codec_list.inc"
#undef TIDEGATE_CODEC
};
}  // namespace

const CodecTableEntry* codec_table(size_t* entries) {
  *entries = sizeof(kCodecTable) / sizeof(kCodecTable[0]);
  return kCodecTable;
}

}  // namespace tidegate
