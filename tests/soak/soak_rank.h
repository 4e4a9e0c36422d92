// What one rank of the soak counts, shared by its collective drivers (soak.cc) and its
// compressed ones (soak_compressed.cc).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "tidegate/tidegate.h"

namespace tidegate::soak {

struct SoakRank {
  tidegate_comm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t ops = 0;
  uint64_t wrong = 0;
  uint64_t failed = 0;
};

inline void report_failure(SoakRank& r, const std::string& what, tidegate_status_t st) {
  ++r.failed;
  std::fprintf(stderr, "soak: rank %d: %s failed: %s: %s\n", r.rank, what.c_str(),
               tidegate_status_string(st), tidegate_last_error());
}

// Counts a wrong value; the first few are described.
inline void report_wrong(SoakRank& r, const std::string& what) {
  if (r.wrong++ < 5) std::fprintf(stderr, "soak: rank %d: WRONG %s\n", r.rank, what.c_str());
}

}  // namespace tidegate::soak
