#include "bench/tidegate_bench/timing.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace tidegate::bench {

Status from_tidegate(tidegate_status_t code, const char* what) {
  if (code == TIDEGATE_OK) return Status::ok();
  return Status(code, std::string(what) + ": " + tidegate_last_error());
}

namespace {

// One iteration of `loop`: prepared and started after its barrier, the operation timed.
Status time_once(const TimedLoop& loop, double* seconds) {
  if (loop.prepare) loop.prepare();
  TG_RETURN_IF_ERROR(loop.barrier());
  const auto start = std::chrono::steady_clock::now();
  TG_RETURN_IF_ERROR(loop.operation());
  const auto stop = std::chrono::steady_clock::now();
  *seconds = std::chrono::duration<double>(stop - start).count();
  return Status::ok();
}

}  // namespace

Status run_timed(const TimedLoop& loop, int warmup, int iters, std::vector<double>* seconds) {
  std::vector<std::vector<double>> each;
  TG_RETURN_IF_ERROR(run_timed_interleaved({&loop}, warmup, iters, &each));
  *seconds = std::move(each.front());
  return Status::ok();
}

Status run_timed_interleaved(const std::vector<const TimedLoop*>& loops, int warmup, int iters,
                             std::vector<std::vector<double>>* seconds) {
  seconds->assign(loops.size(), {});
  for (int i = 0; i < warmup + iters; ++i) {
    for (size_t k = 0; k < loops.size(); ++k) {
      double s = 0;
      TG_RETURN_IF_ERROR(time_once(*loops[k], &s));
      if (i >= warmup) (*seconds)[k].push_back(s);
    }
  }
  return Status::ok();
}

Status slowest_rank_median(tidegate_comm_t comm, std::vector<double> seconds, double* median) {
  tidegate_tensor_t t =
      tidegate_host_tensor(seconds.data(), static_cast<int64_t>(seconds.size()), TIDEGATE_FLOAT64);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_allreduce(comm, &t, &t, TIDEGATE_MAX),
                                   "allreduce of the iteration times"));
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  *median = n == 0 ? 0 : (n % 2 == 1 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2);
  return Status::ok();
}

}  // namespace tidegate::bench
