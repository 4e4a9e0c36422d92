#include "bench/tidegate_bench/json_value.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace tidegate::bench {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

// Recursive descent over the text; every error names the offset where reading stopped.
class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  Status document(JsonValue* out) {
    TG_RETURN_IF_ERROR(value(out, 0));
    skip_space();
    if (pos_ != text_.size()) return error("text after the document");
    return Status::ok();
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status error(const std::string& what) const {
    return config_error(source_ + ": not valid JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }

  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool take_word(const char* word) {
    const size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Status value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return error("nested too deep");
    skip_space();
    if (pos_ >= text_.size()) return error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->kind_ = JsonValue::Kind::kString;
      return string(&out->text_);
    }
    if (take_word("true") || take_word("false")) {
      out->kind_ = JsonValue::Kind::kBool;
      out->boolean_ = c == 't';
      return Status::ok();
    }
    if (take_word("null")) {
      out->kind_ = JsonValue::Kind::kNull;
      return Status::ok();
    }
    return number(out);
  }

  Status object(JsonValue* out, int depth) {
    out->kind_ = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    if (take('}')) return Status::ok();
    do {
      skip_space();
      std::pair<std::string, JsonValue> member;
      if (pos_ >= text_.size() || text_[pos_] != '"') return error("expected a member name");
      TG_RETURN_IF_ERROR(string(&member.first));
      if (!take(':')) return error("expected ':'");
      TG_RETURN_IF_ERROR(value(&member.second, depth + 1));
      out->members_.push_back(std::move(member));
    } while (take(','));
    if (!take('}')) return error("expected ',' or '}'");
    return Status::ok();
  }

  Status array(JsonValue* out, int depth) {
    out->kind_ = JsonValue::Kind::kArray;
    ++pos_;  // '['
    if (take(']')) return Status::ok();
    do {
      out->items_.emplace_back();
      TG_RETURN_IF_ERROR(value(&out->items_.back(), depth + 1));
    } while (take(','));
    if (!take(']')) return error("expected ',' or ']'");
    return Status::ok();
  }

  Status number(JsonValue* out) {
    // strtod accepts more than JSON does (hex, inf, leading '+'): check the JSON shape first.
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return error("expected a value");
    }
    while (pos_ < text_.size() && std::strchr("0123456789.eE+-", text_[pos_]) != nullptr) ++pos_;
    const std::string literal = text_.substr(start, pos_ - start);
    char* end = nullptr;
    out->number_ = std::strtod(literal.c_str(), &end);
    if (*end != '\0') {
      pos_ = start;
      return error("bad number '" + literal + "'");
    }
    out->kind_ = JsonValue::Kind::kNumber;
    return Status::ok();
  }

  // Four hex digits after "\u".
  bool hex4(unsigned* code) {
    if (pos_ + 4 > text_.size()) return false;
    char* end = nullptr;
    const std::string digits = text_.substr(pos_, 4);
    *code = static_cast<unsigned>(std::strtoul(digits.c_str(), &end, 16));
    pos_ += 4;
    return *end == '\0' && std::isxdigit(static_cast<unsigned char>(digits[0]));
  }

  static void append_utf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  Status escape(std::string* out) {
    if (pos_ >= text_.size()) return error("unterminated string");
    const char c = text_[pos_++];
    static const char kFrom[] = "\"\\/bfnrt", kTo[] = "\"\\/\b\f\n\r\t";
    if (const char* hit = std::strchr(kFrom, c); hit != nullptr && c != '\0') {
      out->push_back(kTo[hit - kFrom]);
      return Status::ok();
    }
    unsigned code = 0, low = 0;
    if (c != 'u' || !hex4(&code)) return error("bad escape");
    // A high surrogate must be followed by an escaped low one; together they are one code point.
    if (code >= 0xD800 && code < 0xDC00) {
      if (!take_word("\\u") || !hex4(&low) || low < 0xDC00 || low >= 0xE000) {
        return error("unpaired surrogate");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else if (code >= 0xDC00 && code < 0xE000) {
      return error("unpaired surrogate");
    }
    append_utf8(code, out);
    return Status::ok();
  }

  Status string(std::string* out) {
    ++pos_;  // '"'
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return Status::ok();
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (c == '\\') {
        TG_RETURN_IF_ERROR(escape(out));
      } else {
        out->push_back(c);
      }
    }
    return error("unterminated string");
  }

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
};

Status parse_json(const std::string& text, const std::string& source, JsonValue* out) {
  JsonValue parsed;
  TG_RETURN_IF_ERROR(JsonParser(text, source).document(&parsed));
  *out = std::move(parsed);
  return Status::ok();
}

}  // namespace tidegate::bench
