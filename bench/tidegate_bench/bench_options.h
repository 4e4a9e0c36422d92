// Command line of tidegate-bench: the nccl-tests flags (-b -e -f -i -n -w -c -o -d) plus the
// collective (-C), the transport and algorithm, JSON output, the MPI baseline and how the
// ranks find each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/tidegate_bench/bench_case.h"

namespace tidegate::bench {

enum class Bootstrap { kAuto, kEnv, kMpi };

struct BenchOptions {
  int64_t min_bytes = 8;                           // -b
  int64_t max_bytes = 64 << 20;                    // -e
  int64_t step_factor = 2;                         // -f: multiply the size by this (when -i is 0)
  int64_t step_bytes = 0;                          // -i: add this to the size instead
  int iters = 20;                                  // -n
  int warmup = 5;                                  // -w
  bool check = true;                               // -c 0|1
  tidegate_reduce_op_t op = TIDEGATE_SUM;          // -o
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;       // -d
  Collective collective = Collective::kAllreduce;  // -C
  int root = 0;                                    // -r (broadcast)
  bool in_place = true;  // -I 0|1: also time the in-place variant where one exists
  std::string
      transport;  // --transport: auto or a transport's name ("": TIDEGATE_TRANSPORT, default auto)
  std::string algo;              // --algo ("" = the library's size rule)
  std::string json_path;         // --json
  bool baseline_mpi = false;     // --baseline mpi
  bool compare_choices = false;  // --compare-choices 1: also time every forced transport/algorithm
  std::vector<std::string> choices;  // --choices: only these (empty: every one the case can run)
  Bootstrap bootstrap = Bootstrap::kAuto;  // --bootstrap
  // --codec: after each size's dense row, one row per codec spec (compressed allreduce).
  std::vector<std::string> codecs;
  std::string codec_algorithm;  // --codec-algo ("" = each codec's default)
  std::string allowed;          // --allowed: codec auto's allow-list ("" = TIDEGATE_CODECS)
  std::string sfb;              // --sfb K,M,N: the sufficient-factor bench instead of sizes
  bool error_feedback = false;  // --ef 0|1: error feedback in the timed runs
  // --interleave 1: a size's dense, MPI and codec rows are timed in turns, iteration by
  // iteration, instead of one row's iterations after another's (timing.h).
  bool interleave = false;
  // --step PROFILE: the training-step bench on a model profile instead of sizes (step_bench.h);
  // each --codec spec is then a variant of every mode ("none": dense).
  std::string step;
  double backward_ms = 120;        // --backward-ms
  double forward_ms = -1;          // --forward-ms (< 0: backward / 2)
  std::string step_modes = "all";  // --step-modes
};

// Parses argv; sets *help for -h. CONFIG error naming the bad flag.
Status parse_bench_options(int argc, char** argv, BenchOptions* options, bool* help);
const char* bench_usage();

}  // namespace tidegate::bench
