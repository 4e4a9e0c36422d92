#include "compress/parallel.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "base/types.h"

namespace tidegate {

Status parallel_ranges(int threads, int64_t items, int64_t min_items,
                       const std::function<Status(int64_t begin, int64_t end)>& fn) {
  const int64_t ranges =
      std::max<int64_t>(1, std::min<int64_t>(threads, items / std::max<int64_t>(1, min_items)));
  if (ranges <= 1) return fn(0, items);
  std::vector<Status> results(static_cast<size_t>(ranges));
  auto run = [&](int64_t r) {
    int64_t begin = 0, length = 0;
    block_range(items, static_cast<int>(ranges), static_cast<int>(r), &begin, &length);
    results[static_cast<size_t>(r)] = fn(begin, begin + length);
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(ranges - 1));
  for (int64_t r = 1; r < ranges; ++r) {
    try {
      workers.emplace_back(run, r);
    } catch (const std::system_error&) {
      run(r);  // no thread to be had: do that range here; the result is the same
    }
  }
  run(0);
  for (auto& worker : workers) worker.join();
  for (auto& result : results) {
    if (!result.is_ok()) return std::move(result);
  }
  return Status::ok();
}

}  // namespace tidegate
