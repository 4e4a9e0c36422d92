// Lists of codec specs, as users write them in TIDEGATE_CODECS, in the compressed allreduce's
// `allowed` option and in tidegate-bench --codec: specs separated by commas, where a piece with
// '=' and no ':' continues the spec before it ("qsgd:bits=4,bucket=512,topk:ratio=0.01" is two
// specs: qsgd's own parameters are comma-separated too).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "compress/codec.h"

namespace tidegate {

// The specs of a list, in the order written (empty pieces dropped).
std::vector<std::string> split_codec_list(const std::string& text);

// The lossy codecs an allow-list accepts (codec "auto"), in a canonical order (sorted by
// canonical spec, duplicates dropped), so that ranks that list the same codecs in another order
// or spelling agree. "none" (dense) may be listed and adds nothing: dense is always allowed.
// CONFIG error naming `source` (e.g. "TIDEGATE_CODECS") and the spec for a spec that does not
// parse, and for "auto" inside the list.
Status parse_allow_list(const std::string& text, const std::string& source,
                        std::vector<std::shared_ptr<const Codec>>* allowed);

}  // namespace tidegate
