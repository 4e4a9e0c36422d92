// Optional multi-threading of codec kernels (EncodeContext::threads). Work is split into
// contiguous ranges of independent items (buckets, blocks); since every item's result depends
// only on its own index and the seed, the bytes are the same for any thread count.
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"

namespace tidegate {

// Runs fn(begin, end) over [0, items) split into at most `threads` contiguous ranges of at
// least min_items each (one range, on the calling thread, when threads <= 1 or items are few).
// Returns the error of the lowest failing range, so the reported error does not depend on
// timing.
Status parallel_ranges(int threads, int64_t items, int64_t min_items,
                       const std::function<Status(int64_t begin, int64_t end)>& fn);

}  // namespace tidegate
