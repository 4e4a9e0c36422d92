#include "compress/codec_allow_list.h"

#include <algorithm>

namespace tidegate {

std::vector<std::string> split_codec_list(const std::string& text) {
  std::vector<std::string> specs;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string piece = text.substr(start, comma - start);
    const bool continues = piece.find('=') != std::string::npos &&
                           piece.find(':') == std::string::npos && !specs.empty();
    if (continues) {
      specs.back() += "," + piece;
    } else if (!piece.empty()) {
      specs.push_back(piece);
    }
    start = comma + 1;
  }
  return specs;
}

Status parse_allow_list(const std::string& text, const std::string& source,
                        std::vector<std::shared_ptr<const Codec>>* allowed) {
  std::vector<std::shared_ptr<const Codec>> codecs;
  for (const std::string& spec : split_codec_list(text)) {
    if (spec == "auto") {
      return config_error(source + "='" + text +
                          "': 'auto' cannot be in an allow-list; list the codecs auto may use");
    }
    std::unique_ptr<Codec> codec;
    Status st = make_codec(spec, &codec);
    if (!st.is_ok()) return config_error(source + "='" + text + "': " + st.message());
    if (codec->id() == CodecId::kNone) continue;  // dense is always allowed
    codecs.push_back(std::move(codec));
  }
  std::sort(codecs.begin(), codecs.end(),
            [](const auto& a, const auto& b) { return a->spec() < b->spec(); });
  codecs.erase(std::unique(codecs.begin(), codecs.end(),
                           [](const auto& a, const auto& b) { return a->spec() == b->spec(); }),
               codecs.end());
  *allowed = std::move(codecs);
  return Status::ok();
}

}  // namespace tidegate
