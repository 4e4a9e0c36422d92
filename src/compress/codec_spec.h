// Spec strings and the codec registry behind make_codec().
//
// Grammar:  spec  := name [ ":" param { "," param } ]
//           param := key "=" value
// Names, keys and values are case-sensitive; blanks around them are ignored; a key may appear
// once. Every codec reads its parameters through CodecParams, which turns every mistake into a
// CONFIG error that quotes the spec and names the key and the values it accepts.
//
// Adding a codec: define `Status make_<name>_codec(CodecParams&, std::unique_ptr<Codec>*)` in
// src/compress/<name>.cc and add one line `TIDEGATE_CODEC(<name>, make_<name>_codec)` to
// src/compress/codec_list.inc.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "compress/codec.h"

namespace tidegate {

class CodecParams {
 public:
  // Splits a spec into its codec name and parameters (syntax errors only; keys are checked by
  // the codec's get_*() calls and finish()).
  static Status parse(const std::string& spec, std::string* name, CodecParams* params);

  // Each getter reads one key (or takes the default when it is absent), validates it and
  // remembers the key as known. Errors are CONFIG, naming the spec, the key, the value given
  // and the values accepted.
  Status get_int(const char* key, int64_t default_value, int64_t min, int64_t max, int64_t* out);
  Status get_int_choice(const char* key, int64_t default_value,
                        std::initializer_list<int64_t> accepted, int64_t* out);
  Status get_double(const char* key, double default_value, double min, double max, double* out);
  Status get_choice(const char* key, const char* default_value,
                    std::initializer_list<const char*> accepted, std::string* out);
  // true/false, 1/0, yes/no, on/off.
  Status get_bool(const char* key, bool default_value, bool* out);

  // A CONFIG error about `key` for a codec-specific rule ("a multiple of 8").
  Status invalid(const char* key, const std::string& accepted) const;
  // CONFIG error when the spec has a key that no getter asked for, listing the known keys.
  Status finish() const;

  const std::string& spec() const { return spec_; }
  bool has(const char* key) const;

 private:
  const std::string* find(const char* key) const;
  Status bad_value(const char* key, const std::string& value, const std::string& accepted) const;

  std::string spec_;
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<std::string> known_;
};

using CodecFactory = Status (*)(CodecParams& params, std::unique_ptr<Codec>* codec);

struct CodecTableEntry {
  const char* name;
  CodecFactory factory;
};

// The registered codecs (codec_list.inc), in registration order.
const CodecTableEntry* codec_table(size_t* entries);

}  // namespace tidegate
