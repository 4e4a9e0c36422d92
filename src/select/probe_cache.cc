#include "select/probe_cache.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tidegate {

namespace {

// A real profile is a few hundred bytes; anything far larger is not ours, and is not read
// into memory whole.
constexpr std::streamsize kMaxCacheBytes = 64 << 10;

std::string header_line() {
  return "tidegate-probe-cache " + std::to_string(kProbeCacheVersion) + "\n";
}

std::string names_text(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
  return "[" + text + "]";
}

}  // namespace

CacheLoad load_probe_cache(const std::string& path, int size,
                           const std::vector<std::string>& transports, ProbeProfile* profile,
                           std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot open it";
    return CacheLoad::kMissing;
  }
  std::string text(static_cast<size_t>(kMaxCacheBytes) + 1, '\0');
  in.read(text.data(), kMaxCacheBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) {
    *why = "reading it failed";
    return CacheLoad::kMalformed;
  }
  if (static_cast<std::streamsize>(text.size()) > kMaxCacheBytes) {
    *why = "it is larger than " + std::to_string(kMaxCacheBytes) + " bytes";
    return CacheLoad::kMalformed;
  }
  const std::string header = header_line();
  if (text.compare(0, header.size(), header) != 0) {
    *why = "it does not start with '" + header.substr(0, header.size() - 1) + "'";
    return CacheLoad::kMalformed;
  }
  ProbeProfile cached;
  Status parsed = ProbeProfile::parse(text.substr(header.size()), &cached);
  if (!parsed.is_ok()) {
    *why = parsed.message();
    return CacheLoad::kMalformed;
  }
  std::vector<std::string> names;
  for (const TransportFigures& figures : cached.transports) names.push_back(figures.transport);
  if (cached.size != size || names != transports) {
    *why = "it holds figures for " + std::to_string(cached.size) + " ranks over " +
           names_text(names) + ", not " + std::to_string(size) + " ranks over " +
           names_text(transports);
    return CacheLoad::kMismatch;
  }
  cached.source = "cache:" + path;
  cached.probe_ms = 0;
  *profile = std::move(cached);
  return CacheLoad::kLoaded;
}

Status save_probe_cache(const std::string& path, const ProbeProfile& profile) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return system_error("creating the probe cache file " + temporary, errno);
    out << header_line() << profile.to_text();
    out.flush();
    if (!out) {
      const int saved = errno;
      std::remove(temporary.c_str());
      return system_error("writing the probe cache file " + temporary, saved);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(temporary.c_str());
    return system_error("renaming " + temporary + " to the probe cache file " + path, saved);
  }
  return Status::ok();
}

}  // namespace tidegate
