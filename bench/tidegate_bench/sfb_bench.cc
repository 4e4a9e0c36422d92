#include "bench/tidegate_bench/sfb_bench.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {

Status parse_sfb_shape(const std::string& text, SfbShapeOption* shape) {
  int64_t values[3] = {0, 0, 0};
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t comma = i < 2 ? text.find(',', start) : text.size();
    if (comma == std::string::npos) break;
    const std::string piece = text.substr(start, comma - start);
    char* end = nullptr;
    values[i] = std::strtoll(piece.c_str(), &end, 10);
    if (piece.empty() || *end != '\0' || values[i] < (i == 0 ? 0 : 1) || values[i] > (1 << 20)) {
      return config_error("--sfb '" + text + "': expected K,M,N (e.g. 32,4096,4096)");
    }
    start = comma + 1;
  }
  if (values[1] == 0 || values[2] == 0) {
    return config_error("--sfb '" + text + "': expected K,M,N (e.g. 32,4096,4096)");
  }
  *shape = {values[0], values[1], values[2]};
  return Status::ok();
}

Status run_sfb_bench(tidegate_comm_t comm, int rank, int size, const SfbShapeOption& s, int warmup,
                     int iters, const std::string& json_path) {
  std::vector<float> u(static_cast<size_t>(s.k * s.m)), v(static_cast<size_t>(s.k * s.n));
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.01f * static_cast<float>(i + rank));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.02f * static_cast<float>(i + rank));
  std::vector<float> out(static_cast<size_t>(s.m * s.n));
  tidegate_tensor_t tu = tidegate_host_tensor(u.data(), s.k * s.m, TIDEGATE_FLOAT32);
  tidegate_tensor_t tv = tidegate_host_tensor(v.data(), s.k * s.n, TIDEGATE_FLOAT32);
  tidegate_tensor_t to = tidegate_host_tensor(out.data(), s.m * s.n, TIDEGATE_FLOAT32);
  tu.rows = tv.rows = s.k;
  tu.cols = to.rows = s.m;
  tv.cols = to.cols = s.n;

  struct Method {
    const char* name;
    bool plain;  // the plain allreduce of the matrix (the reference row)
    tidegate_sfb_method_t method;
  };
  const Method methods[] = {{"allreduce", true, TIDEGATE_SFB_DENSE},
                            {"sfb:auto", false, TIDEGATE_SFB_AUTO},
                            {"sfb:factors", false, TIDEGATE_SFB_FACTORS},
                            {"sfb:dense", false, TIDEGATE_SFB_DENSE}};
  FILE* json = nullptr;
  if (rank == 0) {
    if (!json_path.empty()) {
      json = std::fopen(json_path.c_str(), "a");
      if (json == nullptr) return config_error("cannot open --json file '" + json_path + "'");
    }
    std::printf(
        "# sufficient factors: K=%lld per rank, M=%lld, N=%lld, %d ranks: matrix %.1f MiB,"
        " factors %.2f MiB per rank\n",
        static_cast<long long>(s.k), static_cast<long long>(s.m), static_cast<long long>(s.n), size,
        s.m * s.n * 4.0 / (1 << 20), s.k * (s.m + s.n) * 4.0 / (1 << 20));
    std::printf("# %-12s %12s %10s  %s\n", "method", "median_ms", "speed-up", "choice");
  }
  double reference_ms = 0;
  for (const Method& m : methods) {
    char choice[8] = "";
    TimedLoop loop;
    loop.barrier = [&] { return from_tidegate(tidegate_barrier(comm), "tidegate_barrier"); };
    loop.operation = [&]() -> Status {
      if (m.plain) return from_tidegate(tidegate_allreduce(comm, &to, &to, TIDEGATE_SUM), m.name);
      return from_tidegate(tidegate_sfb_allreduce(comm, &tu, &tv, &to, TIDEGATE_SUM, m.method,
                                                  choice, sizeof choice),
                           m.name);
    };
    std::vector<double> seconds;
    TG_RETURN_IF_ERROR(run_timed(loop, warmup, iters, &seconds));
    double median = 0;
    TG_RETURN_IF_ERROR(slowest_rank_median(comm, seconds, &median));
    const double ms = median * 1e3;
    if (m.plain) reference_ms = ms;
    if (rank == 0) {
      const char* shown = m.plain ? "-" : choice;
      std::printf("  %-12s %12.1f %10.2f  %s\n", m.name, ms, reference_ms / ms, shown);
      if (json != nullptr) {
        std::fprintf(json,
                     "{\"sfb\":{\"k\":%lld,\"m\":%lld,\"n\":%lld},\"ranks\":%d,\"method\":\"%s\","
                     "\"median_ms\":%.3f,\"speedup_vs_allreduce\":%.4f,\"choice\":\"%s\"}\n",
                     static_cast<long long>(s.k), static_cast<long long>(s.m),
                     static_cast<long long>(s.n), size, m.name, ms, reference_ms / ms, shown);
      }
    }
  }
  if (json != nullptr) std::fclose(json);
  return Status::ok();
}

}  // namespace tidegate::bench
