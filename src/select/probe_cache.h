// The probe's cache file (TIDEGATE_PROBE_CACHE): a measured profile kept between runs so that
// jobs on the same cluster skip the probe. Only rank 0 reads and writes it; rank 0 then tells
// every rank whether to measure, so ranks never disagree about using it.
//
// Format: the line "tidegate-probe-cache <version>" followed by ProbeProfile::to_text().
// A file that does not parse, or holds figures for another rank count or transport list, is
// never trusted: the probe measures again and overwrites it.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "select/probe_profile.h"

namespace tidegate {

inline constexpr int kProbeCacheVersion = 2;

enum class CacheLoad {
  kLoaded,     // *profile holds the cached figures (source "cache:<path>", probe_ms 0)
  kMissing,    // no file yet
  kMismatch,   // a valid profile, for another size or transport list
  kMalformed,  // unreadable or not a profile: *why says what is wrong
};

// Reads `path` and returns a profile only when it is for `size` ranks and exactly
// `transports` (names, in order). Never fails: problems are reported through the result.
CacheLoad load_probe_cache(const std::string& path, int size,
                           const std::vector<std::string>& transports, ProbeProfile* profile,
                           std::string* why);

// Writes `profile` to `path` atomically (a temporary file in the same directory, then rename),
// so that a reader never sees half a file and concurrent jobs leave one whole profile.
Status save_probe_cache(const std::string& path, const ProbeProfile& profile);

}  // namespace tidegate
