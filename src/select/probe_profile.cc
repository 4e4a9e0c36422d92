#include "select/probe_profile.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace tidegate {

namespace {

// Nominal figures for ProbeProfile::defaults(): a 10 Gbit/s Ethernet link with a kernel TCP
// stack (20 us one-way, 1.25 GB/s) and a single-core float sum (5 GB/s of input). They only
// need to be sane: with the probe off the planner follows the fixed size rule.
constexpr double kDefaultAlphaUs = 20.0;
constexpr double kDefaultBandwidthGBps = 1.25;
constexpr double kDefaultReduceGBps = 5.0;

// Shortest text that reads back to the same double (std::to_chars is locale-independent,
// unlike printf, so a user's LC_NUMERIC cannot turn the decimal point into a comma).
std::string format_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// Strict: the whole text must be one finite, non-negative number.
bool parse_figure(const std::string& text, double* value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto result = std::from_chars(text.data(), end, *value);
  return result.ec == std::errc() && result.ptr == end && std::isfinite(*value) && *value >= 0;
}

bool parse_int(const std::string& text, int min, int max, int* value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto result = std::from_chars(text.data(), end, *value);
  return result.ec == std::errc() && result.ptr == end && *value >= min && *value <= max;
}

// A transport name is one token of lowercase letters, digits, '_' or '-'.
bool valid_transport_name(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  return std::isfinite(value) ? format_double(value) : "null";
}

// Reads the text line by line, each "key value"; the parser asks for the keys in the one
// order to_text() writes them.
class LineReader {
 public:
  explicit LineReader(const std::string& text) : text_(text) {}

  bool at_end() const { return pos_ == text_.size(); }

  // Reads the next line, which must be "<key> <value>"; CONFIG error naming the line otherwise.
  Status expect(const std::string& key, std::string* value) {
    ++line_number_;
    if (at_end()) return error("ends before '" + key + "'");
    const size_t newline = text_.find('\n', pos_);
    if (newline == std::string::npos) return error("is not terminated by a newline");
    const std::string line = text_.substr(pos_, newline - pos_);
    pos_ = newline + 1;
    const std::string prefix = key + " ";
    if (line.compare(0, prefix.size(), prefix) != 0) {
      return error("is '" + line.substr(0, 60) + "', expected '" + key + " <value>'");
    }
    *value = line.substr(prefix.size());
    return Status::ok();
  }

  Status expect_figure(const std::string& key, double* value) {
    std::string text;
    TG_RETURN_IF_ERROR(expect(key, &text));
    if (!parse_figure(text, value))
      return error("'" + key + "' is not a finite number >= 0: '" + text + "'");
    return Status::ok();
  }

  Status error(const std::string& what) const {
    return config_error("probe profile line " + std::to_string(line_number_) + " " + what);
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
  int line_number_ = 0;
};

Status parse_transport(LineReader* reader, const std::string& name, TransportFigures* figures) {
  if (!valid_transport_name(name))
    return reader->error("names an invalid transport '" + name + "'");
  figures->transport = name;
  TG_RETURN_IF_ERROR(reader->expect_figure("alpha_us", &figures->alpha_us));
  TG_RETURN_IF_ERROR(reader->expect_figure("bandwidth_GBps", &figures->bandwidth_GBps));
  TG_RETURN_IF_ERROR(reader->expect_figure("native_alpha_us", &figures->native_alpha_us));
  TG_RETURN_IF_ERROR(
      reader->expect_figure("native_bandwidth_GBps", &figures->native_bandwidth_GBps));
  TG_RETURN_IF_ERROR(reader->expect_figure("native_max_bytes", &figures->native_max_bytes));
  return Status::ok();
}

}  // namespace

const CodecFigures* ProbeProfile::find_codec(const std::string& codec) const {
  for (const CodecFigures& figures : codecs) {
    if (figures.codec == codec) return &figures;
  }
  return nullptr;
}

const TransportFigures* ProbeProfile::find(const std::string& name) const {
  for (const TransportFigures& figures : transports) {
    if (figures.transport == name) return &figures;
  }
  return nullptr;
}

std::string ProbeProfile::to_text() const {
  std::ostringstream out;
  out << "size " << size << "\n";
  out << "source " << source << "\n";
  out << "probe_ms " << format_double(probe_ms) << "\n";
  out << "reduce_GBps " << format_double(reduce_GBps) << "\n";
  out << "transports " << transports.size() << "\n";
  for (const TransportFigures& t : transports) {
    out << "transport " << t.transport << "\n";
    out << "alpha_us " << format_double(t.alpha_us) << "\n";
    out << "bandwidth_GBps " << format_double(t.bandwidth_GBps) << "\n";
    out << "native_alpha_us " << format_double(t.native_alpha_us) << "\n";
    out << "native_bandwidth_GBps " << format_double(t.native_bandwidth_GBps) << "\n";
    out << "native_max_bytes " << format_double(t.native_max_bytes) << "\n";
  }
  out << "codecs " << codecs.size() << "\n";
  for (const CodecFigures& c : codecs) {
    out << "codec " << c.codec << "\n";
    out << "encode_GBps " << format_double(c.encode_GBps) << "\n";
    out << "decode_GBps " << format_double(c.decode_GBps) << "\n";
  }
  return out.str();
}

Status ProbeProfile::parse(const std::string& text, ProbeProfile* out) {
  LineReader reader(text);
  ProbeProfile profile;
  std::string value;
  TG_RETURN_IF_ERROR(reader.expect("size", &value));
  if (!parse_int(value, 1, 1 << 24, &profile.size)) {
    return reader.error("'size' is not a rank count >= 1: '" + value + "'");
  }
  TG_RETURN_IF_ERROR(reader.expect("source", &profile.source));
  if (profile.source.empty()) return reader.error("has an empty 'source'");
  TG_RETURN_IF_ERROR(reader.expect_figure("probe_ms", &profile.probe_ms));
  TG_RETURN_IF_ERROR(reader.expect_figure("reduce_GBps", &profile.reduce_GBps));
  int count = 0;
  TG_RETURN_IF_ERROR(reader.expect("transports", &value));
  // The count bounds the loop below, so it is capped well above any real transport table.
  if (!parse_int(value, 0, 16, &count)) {
    return reader.error("'transports' is not a count in [0, 16]: '" + value + "'");
  }
  std::set<std::string> seen;
  for (int i = 0; i < count; ++i) {
    TransportFigures figures;
    TG_RETURN_IF_ERROR(reader.expect("transport", &value));
    TG_RETURN_IF_ERROR(parse_transport(&reader, value, &figures));
    if (!seen.insert(figures.transport).second)
      return reader.error("repeats transport '" + value + "'");
    profile.transports.push_back(figures);
  }
  // Codec throughputs (absent from profiles written before they were measured).
  if (!reader.at_end()) {
    TG_RETURN_IF_ERROR(reader.expect("codecs", &value));
    if (!parse_int(value, 0, 64, &count)) {
      return reader.error("'codecs' is not a count in [0, 64]: '" + value + "'");
    }
    std::set<std::string> codecs_seen;
    for (int i = 0; i < count; ++i) {
      CodecFigures figures;
      TG_RETURN_IF_ERROR(reader.expect("codec", &figures.codec));
      if (!valid_transport_name(figures.codec) || !codecs_seen.insert(figures.codec).second) {
        return reader.error("names an invalid or repeated codec '" + figures.codec + "'");
      }
      TG_RETURN_IF_ERROR(reader.expect_figure("encode_GBps", &figures.encode_GBps));
      TG_RETURN_IF_ERROR(reader.expect_figure("decode_GBps", &figures.decode_GBps));
      profile.codecs.push_back(figures);
    }
  }
  if (!reader.at_end()) return reader.error("follows the last codec: trailing text");
  *out = std::move(profile);
  return Status::ok();
}

std::string ProbeProfile::to_json() const {
  std::string json = "{\"size\":" + std::to_string(size) + ",\"source\":" + json_string(source) +
                     ",\"probe_ms\":" + json_number(probe_ms) +
                     ",\"reduce_GBps\":" + json_number(reduce_GBps) + ",\"probe\":{";
  for (size_t i = 0; i < transports.size(); ++i) {
    const TransportFigures& t = transports[i];
    json += (i == 0 ? "" : ",") + json_string(t.transport) +
            ":{\"alpha_us\":" + json_number(t.alpha_us) +
            ",\"bandwidth_GBps\":" + json_number(t.bandwidth_GBps) +
            ",\"native_alpha_us\":" + json_number(t.native_alpha_us) +
            ",\"native_bandwidth_GBps\":" + json_number(t.native_bandwidth_GBps) +
            ",\"native_max_bytes\":" + json_number(t.native_max_bytes) + "}";
  }
  json += "},\"codecs\":{";
  for (size_t i = 0; i < codecs.size(); ++i) {
    const CodecFigures& c = codecs[i];
    json += (i == 0 ? "" : ",") + json_string(c.codec) +
            ":{\"encode_GBps\":" + json_number(c.encode_GBps) +
            ",\"decode_GBps\":" + json_number(c.decode_GBps) + "}";
  }
  return json + "}}";
}

ProbeProfile ProbeProfile::defaults(int size, const std::vector<std::string>& transports) {
  ProbeProfile profile;
  profile.size = size;
  profile.source = "defaults";
  profile.reduce_GBps = kDefaultReduceGBps;
  for (const std::string& name : transports) {
    TransportFigures figures;
    figures.transport = name;
    figures.alpha_us = kDefaultAlphaUs;
    figures.bandwidth_GBps = kDefaultBandwidthGBps;
    profile.transports.push_back(figures);
  }
  return profile;
}

}  // namespace tidegate
