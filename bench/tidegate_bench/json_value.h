// A small JSON reader for the bench's inputs (the model profiles of --step). The library only
// ever writes JSON, so the bench parses its few input files itself rather than take a
// dependency: a document tree of objects, arrays, strings, numbers, booleans and null.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tidegate::bench {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind() const { return kind_; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  double number() const { return number_; }
  const std::string& text() const { return text_; }
  const std::vector<JsonValue>& items() const { return items_; }
  // The member `key` of an object (the first, should the document repeat it); nullptr when
  // absent or when this is not an object.
  const JsonValue* find(const std::string& key) const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool boolean_ = false;
  double number_ = 0;
  std::string text_;
  std::vector<JsonValue> items_;                            // array elements
  std::vector<std::pair<std::string, JsonValue>> members_;  // object members, in file order
};

// Parses a whole document (RFC 8259; nesting at most 64 deep). CONFIG error naming `source`
// and the byte offset of the first problem.
Status parse_json(const std::string& text, const std::string& source, JsonValue* out);

}  // namespace tidegate::bench
