#include "collective_checks.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "test_values.h"

namespace tidegate::testing {

namespace {

uint64_t fnv1a(const unsigned char* data, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  return 1;
}

// Every rank's hash of its output must equal every other rank's.
bool identical_everywhere(tidegate_comm_t comm, int size, uint64_t hash) {
  std::vector<int64_t> all(static_cast<size_t>(size));
  int64_t mine = static_cast<int64_t>(hash);
  tidegate_tensor_t in = tidegate_host_tensor(&mine, 1, TIDEGATE_INT64);
  tidegate_tensor_t out = tidegate_host_tensor(all.data(), size, TIDEGATE_INT64);
  if (tidegate_allgather(comm, &in, &out) != TIDEGATE_OK) return false;
  for (int64_t h : all) {
    if (h != mine) return false;
  }
  return true;
}

int check_allreduce(tidegate_comm_t comm, int rank, int size, int64_t count, tidegate_dtype_t dtype,
                    tidegate_reduce_op_t op) {
  const size_t bytes = static_cast<size_t>(count) * tidegate_dtype_size(dtype);
  std::vector<unsigned char> data(bytes);
  for (int64_t i = 0; i < count; ++i) store_value(data.data(), dtype, i, input_value(rank, i, op));
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, dtype);
  const std::string what = "allreduce count " + std::to_string(count) + " dtype " +
                           std::to_string(dtype) + " op " + std::to_string(op);
  if (tidegate_allreduce(comm, &t, &t, op) != TIDEGATE_OK)
    return fail(rank, what + ": " + tidegate_last_error());
  const bool exact = op != TIDEGATE_AVG || is_integer(dtype);
  for (int64_t i = 0; i < count; ++i) {
    const double want = expected_value(size, i, op, dtype);
    const double got = load_value(data.data(), dtype, i);
    if (exact ? got != want : std::abs(got - want) > 1e-2 * std::abs(want)) {
      return fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                            ", expected " + std::to_string(want));
    }
  }
  if (!identical_everywhere(comm, size, fnv1a(data.data(), bytes))) {
    return fail(rank, what + ": results differ bitwise between ranks");
  }
  return 0;
}

// A gradient-like input every rank can compute for every other rank.
float gradient_value(int rank, int64_t i) {
  const uint64_t h =
      (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(rank) << 56);
  const double unit = static_cast<double>((h >> 11) & 0xfffff) / 1048576.0 * 2.0 - 1.0;
  return static_cast<float>(i % 61 == 0 ? unit * 2.0 : unit * 0.01);
}

// The compressed allreduce over this job's transport: identical on every rank, and within a
// codec's bound of the exact mean (relative L2 error).
int check_compressed(tidegate_comm_t comm, int rank, int size, int64_t count, const char* codec,
                     const char* algorithm, double bound) {
  std::vector<float> data(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[i] = gradient_value(rank, i);
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, TIDEGATE_FLOAT32);
  tidegate_compression_t options{};
  options.codec = codec;
  options.key = 77;
  options.algorithm = algorithm;
  const std::string what = std::string("compressed allreduce ") + codec + " (" + algorithm +
                           ") count " + std::to_string(count);
  if (tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_AVG, &options) != TIDEGATE_OK)
    return fail(rank, what + ": " + tidegate_last_error());
  double error = 0, norm = 0;
  for (int64_t i = 0; i < count; ++i) {
    double mean = 0;
    for (int r = 0; r < size; ++r) mean += gradient_value(r, i);
    mean /= size;
    error += (data[i] - mean) * (data[i] - mean);
    norm += mean * mean;
  }
  if (norm > 0 && !(std::sqrt(error / norm) <= bound)) {
    return fail(rank, what + ": relative error " + std::to_string(std::sqrt(error / norm)) +
                          " above " + std::to_string(bound));
  }
  if (!identical_everywhere(
          comm, size,
          fnv1a(reinterpret_cast<unsigned char*>(data.data()), data.size() * sizeof(float)))) {
    return fail(rank, what + ": results differ bitwise between ranks");
  }
  return 0;
}

int run_compressed_checks(tidegate_comm_t comm, int rank, int size, int* checks) {
  struct Codec {
    const char* spec;
    const char* algorithm;
    double bound;
  };
  const Codec codecs[] = {{"fp16", "sra", 1e-3},
                          {"bf16", "sra", 1e-2},
                          {"qsgd", "sra", 1.5},
                          {"maxmin", "sra", 1.0},
                          {"onebit", "sra", 1.5},
                          {"signsgd", "summable", 1e9},
                          {"topk:ratio=0.05", "allgather", 1.0},
                          {"topk:ratio=0.05", "sparse_reduce_scatter", 1.0},
                          {"randomk:ratio=0.05", "shared_randomk", 1.0},
                          {"powersgd:rank=2", "powersgd", 1.0}};
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
    for (const Codec& c : codecs) {
      if (int rc = check_compressed(comm, rank, size, count, c.spec, c.algorithm, c.bound))
        return rc;
      ++*checks;
    }
  }
  return 0;
}

}  // namespace

int run_value_checks(tidegate_comm_t comm) {
  int rank = 0, size = 0;
  tidegate_comm_rank(comm, &rank);
  tidegate_comm_size(comm, &size);
  int checks = 0;
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
    for (tidegate_dtype_t dtype :
         {TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16, TIDEGATE_BFLOAT16, TIDEGATE_INT32,
          TIDEGATE_INT64, TIDEGATE_UINT8}) {
      for (tidegate_reduce_op_t op :
           {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN, TIDEGATE_MAX, TIDEGATE_PROD}) {
        if (int rc = check_allreduce(comm, rank, size, count, dtype, op)) return rc;
        ++checks;
      }
    }
  }
  int compressed = 0;
  if (int rc = run_compressed_checks(comm, rank, size, &compressed)) return rc;
  if (tidegate_barrier(comm) != TIDEGATE_OK)
    return fail(rank, std::string("barrier: ") + tidegate_last_error());
  if (rank == 0)
    std::printf(
        "%d allreduce checks and %d compressed allreduce checks passed on %d ranks, "
        "identical on every rank\n",
        checks, compressed, size);
  return 0;
}

int run_scenario(tidegate_comm_t comm, const std::string& scenario) {
  int rank = 0, size = 0;
  tidegate_comm_rank(comm, &rank);
  tidegate_comm_size(comm, &size);
  std::vector<float> data(4096, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  tidegate_status_t st = TIDEGATE_OK;
  tidegate_status_t want = TIDEGATE_OK;
  if (scenario == "mismatch") {
    tidegate_tensor_t t =
        tidegate_host_tensor(data.data(), rank == 1 ? 4000 : 4096, TIDEGATE_FLOAT32);
    st = tidegate_allreduce(comm, &t, &t, TIDEGATE_SUM);
    want = TIDEGATE_ERR_MISMATCH;
  } else if (scenario == "timeout") {
    tidegate_tensor_t t = tidegate_host_tensor(data.data(), 4096, TIDEGATE_FLOAT32);
    if (rank == size - 1) {
      // The stalled peer: it posts nothing for well past the others' deadline (this sleep is the
      // behaviour under test, not a wait for a condition), then finds its communicator failed.
      std::this_thread::sleep_for(std::chrono::seconds(4));
      st = tidegate_barrier(comm);
    } else {
      st = tidegate_allreduce(comm, &t, &t, TIDEGATE_SUM);
    }
    want = TIDEGATE_ERR_TIMEOUT;
  } else {
    return fail(rank, "unknown scenario " + scenario);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string message = tidegate_last_error();
  std::printf("rank %d: %s after %.2f s: %s\n", rank, tidegate_status_string(st), seconds,
              message.c_str());
  if (scenario == "timeout" && rank == size - 1) {
    // The others gave up and aborted: the stalled rank must learn of it, at once.
    return st != TIDEGATE_OK && seconds < 5.0
               ? 0
               : fail(rank, "the stalled rank did not see the failure");
  }
  if (st != want) return fail(rank, std::string("expected ") + tidegate_status_string(want));
  if (scenario == "mismatch" && (message.find("field 'count'") == std::string::npos ||
                                 message.find("op #0") == std::string::npos)) {
    return fail(rank, "the mismatch message does not name the op and the field");
  }
  return 0;
}

int run_from_args(tidegate_comm_t comm, int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--scenario") == 0) return run_scenario(comm, argv[i + 1]);
  }
  return run_value_checks(comm);
}

}  // namespace tidegate::testing
