#include "bench/tidegate_bench/bench_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "base/types.h"
#include "bench/tidegate_bench/step_sync.h"
#include "compress/codec_allow_list.h"

namespace tidegate::bench {

namespace {

Status integer_flag(const std::string& flag, const char* text, int64_t min, int64_t max,
                    int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || value < min || value > max) {
    return config_error(flag + " '" + text + "' must be an integer in [" + std::to_string(min) +
                        ", " + std::to_string(max) + "]");
  }
  *out = value;
  return Status::ok();
}

Status milliseconds_flag(const std::string& flag, const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || errno != 0 || !(value >= 0 && value <= 1e6)) {
    return config_error(flag + " '" + text + "' must be milliseconds in [0, 1e6]");
  }
  *out = value;
  return Status::ok();
}

Status bytes_flag(const std::string& flag, const char* text, int64_t* out) {
  if (!parse_byte_size(text, out)) {
    return config_error(flag + " '" + text + "' is not a byte size such as 8, 64K, 1M or 1G");
  }
  return Status::ok();
}

Status parse_op(const std::string& text, tidegate_reduce_op_t* op) {
  for (tidegate_reduce_op_t candidate :
       {TIDEGATE_SUM, TIDEGATE_PROD, TIDEGATE_MIN, TIDEGATE_MAX, TIDEGATE_AVG}) {
    if (text == reduce_op_name(candidate)) {
      *op = candidate;
      return Status::ok();
    }
  }
  return config_error("-o '" + text + "' must be sum, prod, min, max or avg");
}

// nccl-tests' names ("float", "half", "int") are accepted besides tidegate's.
Status parse_dtype(const std::string& text, tidegate_dtype_t* dtype) {
  static const struct {
    const char* name;
    tidegate_dtype_t dtype;
  } kNames[] = {
      {"float", TIDEGATE_FLOAT32},     {"float32", TIDEGATE_FLOAT32}, {"double", TIDEGATE_FLOAT64},
      {"float64", TIDEGATE_FLOAT64},   {"half", TIDEGATE_FLOAT16},    {"float16", TIDEGATE_FLOAT16},
      {"bfloat16", TIDEGATE_BFLOAT16}, {"int32", TIDEGATE_INT32},     {"int", TIDEGATE_INT32},
      {"int64", TIDEGATE_INT64},       {"uint8", TIDEGATE_UINT8}};
  for (const auto& entry : kNames) {
    if (text == entry.name) {
      *dtype = entry.dtype;
      return Status::ok();
    }
  }
  return config_error("-d '" + text +
                      "' must be float, double, half, bfloat16, int32, int64 or uint8");
}

}  // namespace

const char* bench_usage() {
  return "usage: tidegate-bench [options]\n"
         "  under mpirun:        mpirun -np 4 tidegate-bench -b 1K -e 64M --baseline mpi\n"
         "  under tidegate-run:  tidegate-run -n 4 -- tidegate-bench -b 1K -e 64M\n"
         "\n"
         "  -b BYTES        smallest size (8)          -e BYTES   largest size (64M)\n"
         "  -f FACTOR       size multiplier (2)        -i BYTES   size increment instead of -f\n"
         "  -n ITERS        timed iterations (20)      -w ITERS   warm-up iterations (5)\n"
         "  -c 0|1          check results (1)          -o OP      sum|prod|min|max|avg (sum)\n"
         "  -d TYPE         float|double|half|bfloat16|int32|int64|uint8 (float)\n"
         "  -C COLLECTIVE   allreduce|reduce_scatter|allgather|allgatherv|broadcast|alltoallv\n"
         "  -r ROOT         broadcast root (0)         -I 0|1     also time in place (1)\n"
         "  --transport T   auto (default: every transport, the measured plan chooses per\n"
         "                  row) or one transport (tcp, mpi, ucx, nccl; sets TIDEGATE_TRANSPORT)\n"
         "  --compare-choices 0|1  also time every transport/algorithm forced, same buffers,\n"
         "                  and print auto's time over the fastest (0)\n"
         "  --choices LIST  time only these forced choices, e.g. mpi/native,tcp/ring\n"
         "                  (implies --compare-choices 1; ones the case cannot run are left out)\n"
         "  --algo A        force the algorithm (sets TIDEGATE_ALGO=<collective>=A)\n"
         "  --json FILE     write one JSON object per row to FILE (rank 0)\n"
         "  --baseline mpi  also time the matching MPI collective on the same buffers\n"
         "  --codec LIST    after each dense row, a compressed allreduce row per codec spec\n"
         "                  (e.g. fp16,qsgd:bits=4,bucket=512,topk:ratio=0.01): time, ratio "
         "(dense\n"
         "                  ring bytes / bytes sent per rank), rel_error (one step, error\n"
         "                  feedback off, vs the exact sum); busbw on the dense size\n"
         "                  auto: the plan picks dense or a codec of --allowed per size\n"
         "  --codec-algo A  the compressed algorithm (default: each codec's own)\n"
         "  --allowed LIST  codec auto's allow-list (default: TIDEGATE_CODECS)\n"
         "  --sfb K,M,N     instead of sizes: the sufficient-factor allreduce of a K x M and a\n"
         "                  K x N factor per rank against the allreduce of the M x N matrix\n"
         "  --ef 0|1        error feedback in the timed compressed runs (0)\n"
         "  --interleave 0|1  time a size's dense, MPI and --codec rows in turns, one\n"
         "                  iteration of each after another, so that a slow phase of a\n"
         "                  shared machine falls on every row alike (0: row after row)\n"
         "  --step PROFILE  instead of sizes: replay a training step on a model profile\n"
         "                  (bench/profiles/*.json): emulated compute, real gradients,\n"
         "                  each --step-modes mode with compute and alone, once per\n"
         "                  --codec of LIST (none = dense, the default; error feedback on)\n"
         "  --backward-ms N total backward compute, spread over layers by FLOPs (120)\n"
         "  --forward-ms N  total forward compute (backward / 2)\n"
         "  --step-modes L  noverlap,ddp,session,session-fifo or all (all)\n"
         "  --bootstrap auto|env|mpi  how ranks meet: env = tidegate-run's variables,\n"
         "                  mpi = MPI_Init + tidegate_comm_create_from_mpi (auto: env when\n"
         "                  TIDEGATE_RANK is set, else mpi when built with MPI)\n"
         "\n"
         "Time: for each iteration, a barrier (MPI_Barrier for every row with --baseline mpi,\n"
         "else tidegate_barrier), then the collective timed on every rank; the\n"
         "row shows the median over iterations of the slowest rank's time. algbw = size/time;\n"
         "busbw = algbw x the collective's factor (nccl-tests): allreduce 2(n-1)/n,\n"
         "reduce_scatter, allgather(v) and alltoallv (n-1)/n, broadcast 1.\n";
}

namespace {

// Flags that take a named value (everything but the numeric ones).
Status parse_word_flag(const std::string& flag, const char* value, BenchOptions* o, bool* known) {
  *known = true;
  if (flag == "-o") return parse_op(value, &o->op);
  if (flag == "-d") return parse_dtype(value, &o->dtype);
  if (flag == "-C") {
    if (parse_collective(value, &o->collective)) return Status::ok();
    return config_error(std::string("-C '") + value + "' is not a collective this tool runs");
  }
  if (flag == "--transport")
    o->transport = value;
  else if (flag == "--algo")
    o->algo = value;
  else if (flag == "--json")
    o->json_path = value;
  else if (flag == "--codec")
    o->codecs = split_codec_list(value);
  else if (flag == "--choices") {
    o->choices = split_codec_list(value);
    o->compare_choices = true;
  } else if (flag == "--codec-algo")
    o->codec_algorithm = value;
  else if (flag == "--allowed")
    o->allowed = value;
  else if (flag == "--sfb")
    o->sfb = value;
  else if (flag == "--step")
    o->step = value;
  else if (flag == "--step-modes")
    o->step_modes = value;
  else if (flag == "--baseline") {
    if (std::strcmp(value, "mpi") != 0 && std::strcmp(value, "none") != 0) {
      return config_error("--baseline must be mpi or none");
    }
    o->baseline_mpi = std::strcmp(value, "mpi") == 0;
  } else if (flag == "--bootstrap") {
    if (std::strcmp(value, "auto") == 0)
      o->bootstrap = Bootstrap::kAuto;
    else if (std::strcmp(value, "env") == 0)
      o->bootstrap = Bootstrap::kEnv;
    else if (std::strcmp(value, "mpi") == 0)
      o->bootstrap = Bootstrap::kMpi;
    else
      return config_error("--bootstrap must be auto, env or mpi");
  } else {
    *known = false;
  }
  return Status::ok();
}

// Flags that take a number or a byte size.
Status parse_number_flag(const std::string& flag, const char* value, BenchOptions* o, bool* known) {
  *known = true;
  int64_t n = 0;
  if (flag == "-b") return bytes_flag(flag, value, &o->min_bytes);
  if (flag == "-e") return bytes_flag(flag, value, &o->max_bytes);
  if (flag == "-i") return bytes_flag(flag, value, &o->step_bytes);
  if (flag == "-f") return integer_flag(flag, value, 2, 1 << 20, &o->step_factor);
  if (flag == "-n" || flag == "-w" || flag == "-r") {
    TG_RETURN_IF_ERROR(integer_flag(flag, value, flag == "-n" ? 1 : 0, 1 << 20, &n));
    (flag == "-n" ? o->iters : flag == "-w" ? o->warmup : o->root) = static_cast<int>(n);
    return Status::ok();
  }
  if (flag == "--backward-ms") return milliseconds_flag(flag, value, &o->backward_ms);
  if (flag == "--forward-ms") return milliseconds_flag(flag, value, &o->forward_ms);
  if (flag == "--ef") {
    TG_RETURN_IF_ERROR(integer_flag(flag, value, 0, 1, &n));
    o->error_feedback = n != 0;
    return Status::ok();
  }
  if (flag == "-c" || flag == "-I" || flag == "--compare-choices" || flag == "--interleave") {
    TG_RETURN_IF_ERROR(integer_flag(flag, value, 0, 1, &n));
    bool& set = flag == "-c"                  ? o->check
                : flag == "-I"                ? o->in_place
                : flag == "--compare-choices" ? o->compare_choices
                                              : o->interleave;
    set = n != 0;
    return Status::ok();
  }
  *known = false;
  return Status::ok();
}

}  // namespace

Status parse_bench_options(int argc, char** argv, BenchOptions* options, bool* help) {
  BenchOptions o;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      return Status::ok();
    }
    if (i + 1 >= argc) return config_error("unknown option or missing value: '" + flag + "'");
    const char* value = argv[++i];
    bool known = false;
    TG_RETURN_IF_ERROR(parse_number_flag(flag, value, &o, &known));
    if (!known) TG_RETURN_IF_ERROR(parse_word_flag(flag, value, &o, &known));
    if (!known) return config_error("unknown option '" + flag + "'");
  }
  if (o.max_bytes < o.min_bytes) return config_error("-e must not be smaller than -b");
  std::vector<StepMode> modes;
  TG_RETURN_IF_ERROR(parse_step_modes(o.step_modes, &modes));
  *options = o;
  return Status::ok();
}

}  // namespace tidegate::bench
