// One rank of the soak (./run.sh soak --minutes N): random collectives, dtypes, reduce ops and
// sizes from 1 byte to 32 MiB, blocking and several in flight, and compressed allreduces of every
// codec (soak_compressed.h), for N minutes; every result is checked against a reference; each rank
// samples its resident memory, open descriptors and threads every --sample-s seconds. Every rank
// draws the same sequence (a generator seeded with the same seed), so the ranks post the same
// collectives in the same order.
//
// Output, one line each, for bench/soak/summarise_soak.py:
//   soak-sample rank R t_s T ops N wrong W rss_kb K fds F threads H
//   soak-done rank R ops N wrong W seconds T
// Exit code 0 when no value was wrong and no collective failed.
#include <dirent.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "soak_compressed.h"
#include "soak_rank.h"
#include "test_values.h"
#include "tidegate/tidegate.h"

namespace {

using Rank = tidegate::soak::SoakRank;
using tidegate::soak::report_failure;

using tidegate::testing::expected_value;
using tidegate::testing::input_value;
using tidegate::testing::load_value;
using tidegate::testing::store_value;

constexpr tidegate_dtype_t kDtypes[] = {TIDEGATE_FLOAT32,  TIDEGATE_FLOAT64, TIDEGATE_FLOAT16,
                                        TIDEGATE_BFLOAT16, TIDEGATE_INT32,   TIDEGATE_INT64,
                                        TIDEGATE_UINT8};
constexpr tidegate_reduce_op_t kOps[] = {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN, TIDEGATE_MAX,
                                         TIDEGATE_PROD};

struct Options {
  double minutes = 1;
  int sample_s = 10;
  uint64_t seed = 1;
};

int64_t status_field_kb(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0) return std::atoll(line.c_str() + std::strlen(name));
  }
  return -1;
}

int open_descriptors() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) count += entry->d_name[0] != '.';
    ::closedir(dir);
  }
  return count - 1;  // the directory's own descriptor
}

// Elements of `dtype` for a message of about `bytes` bytes (at least one).
int64_t elements(int64_t bytes, tidegate_dtype_t dtype) {
  return std::max<int64_t>(1, bytes / static_cast<int64_t>(tidegate_dtype_size(dtype)));
}

void fill(std::vector<unsigned char>* buffer, tidegate_dtype_t dtype, int64_t count, int rank,
          tidegate_reduce_op_t op, int64_t first = 0) {
  buffer->resize(static_cast<size_t>(count) * tidegate_dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i)
    store_value(buffer->data(), dtype, i, input_value(rank, first + i, op));
}

// Checks `count` reduced elements starting at global index `first`; counts wrong values.
void check_reduced(Rank& r, const std::vector<unsigned char>& out, tidegate_dtype_t dtype,
                   tidegate_reduce_op_t op, int64_t count, int64_t first, const char* what) {
  for (int64_t i = 0; i < count; ++i) {
    if (load_value(out.data(), dtype, i) != expected_value(r.size, first + i, op, dtype)) {
      if (r.wrong++ < 5) {
        std::fprintf(stderr, "soak: rank %d: WRONG %s dtype %d op %d element %lld\n", r.rank, what,
                     dtype, op, static_cast<long long>(first + i));
      }
    }
  }
}

void run_allreduce(Rank& r, tidegate_dtype_t dtype, tidegate_reduce_op_t op, int64_t count) {
  std::vector<unsigned char> data;
  fill(&data, dtype, count, r.rank, op);
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, dtype);
  if (const tidegate_status_t st = tidegate_allreduce(r.comm, &t, &t, op); st != TIDEGATE_OK) {
    return report_failure(r, "allreduce", st);
  }
  check_reduced(r, data, dtype, op, count, 0, "allreduce");
}

// Several allreduces in flight at once (the engine's window), waited for in posting order.
void run_window(Rank& r, tidegate_dtype_t dtype, tidegate_reduce_op_t op, int64_t count) {
  constexpr int kInFlight = 6;
  std::vector<std::vector<unsigned char>> data(kInFlight);
  std::vector<tidegate_request_t> requests(kInFlight, nullptr);
  for (int k = 0; k < kInFlight; ++k) {
    fill(&data[k], dtype, count, r.rank, op);
    tidegate_tensor_t t = tidegate_host_tensor(data[k].data(), count, dtype);
    if (const tidegate_status_t st = tidegate_iallreduce(r.comm, &t, &t, op, &requests[k]);
        st != TIDEGATE_OK) {
      report_failure(r, "iallreduce", st);
      requests[k] = nullptr;
    }
  }
  for (int k = 0; k < kInFlight; ++k) {
    if (requests[k] == nullptr) continue;
    const tidegate_status_t st = tidegate_request_wait(requests[k], -1);
    tidegate_request_free(requests[k]);
    if (st != TIDEGATE_OK) {
      report_failure(r, "iallreduce wait", st);
      continue;
    }
    check_reduced(r, data[k], dtype, op, count, 0, "iallreduce");
  }
}

void run_reduce_scatter(Rank& r, tidegate_dtype_t dtype, tidegate_reduce_op_t op, int64_t count) {
  std::vector<unsigned char> in, out;
  fill(&in, dtype, count, r.rank, op);
  int64_t offset = 0, length = 0;
  tidegate_block_range(count, r.size, r.rank, &offset, &length);
  out.resize(static_cast<size_t>(length) * tidegate_dtype_size(dtype));
  tidegate_tensor_t ti = tidegate_host_tensor(in.data(), count, dtype);
  tidegate_tensor_t to = tidegate_host_tensor(out.data(), length, dtype);
  if (const tidegate_status_t st = tidegate_reduce_scatter(r.comm, &ti, &to, op);
      st != TIDEGATE_OK) {
    return report_failure(r, "reduce_scatter", st);
  }
  check_reduced(r, out, dtype, op, length, offset, "reduce_scatter");
}

void run_allgather(Rank& r, tidegate_dtype_t dtype, int64_t count) {
  std::vector<unsigned char> in,
      out(static_cast<size_t>(count * r.size) * tidegate_dtype_size(dtype));
  fill(&in, dtype, count, r.rank, TIDEGATE_SUM);
  tidegate_tensor_t ti = tidegate_host_tensor(in.data(), count, dtype);
  tidegate_tensor_t to = tidegate_host_tensor(out.data(), count * r.size, dtype);
  if (const tidegate_status_t st = tidegate_allgather(r.comm, &ti, &to); st != TIDEGATE_OK) {
    return report_failure(r, "allgather", st);
  }
  for (int q = 0; q < r.size; ++q) {
    for (int64_t i = 0; i < count; ++i) {
      if (load_value(out.data(), dtype, q * count + i) != input_value(q, i, TIDEGATE_SUM)) {
        if (r.wrong++ < 5) std::fprintf(stderr, "soak: rank %d: WRONG allgather\n", r.rank);
      }
    }
  }
}

void run_broadcast(Rank& r, tidegate_dtype_t dtype, int64_t count, int root) {
  std::vector<unsigned char> data;
  fill(&data, dtype, count, r.rank, TIDEGATE_SUM);
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, dtype);
  if (const tidegate_status_t st = tidegate_broadcast(r.comm, &t, root); st != TIDEGATE_OK) {
    return report_failure(r, "broadcast", st);
  }
  for (int64_t i = 0; i < count; ++i) {
    if (load_value(data.data(), dtype, i) != input_value(root, i, TIDEGATE_SUM)) {
      if (r.wrong++ < 5) std::fprintf(stderr, "soak: rank %d: WRONG broadcast\n", r.rank);
    }
  }
}

void sample(const Rank& r, double seconds) {
  std::printf(
      "soak-sample rank %d t_s %.0f ops %llu wrong %llu failed %llu rss_kb %lld fds %d threads "
      "%lld\n",
      r.rank, seconds, static_cast<unsigned long long>(r.ops),
      static_cast<unsigned long long>(r.wrong), static_cast<unsigned long long>(r.failed),
      static_cast<long long>(status_field_kb("VmRSS:")), open_descriptors(),
      static_cast<long long>(status_field_kb("Threads:")));
  std::fflush(stdout);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--minutes")
      o.minutes = std::atof(argv[i + 1]);
    else if (flag == "--sample-s")
      o.sample_s = std::atoi(argv[i + 1]);
    else if (flag == "--seed")
      o.seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Rank r;
  if (tidegate_comm_create_from_env(&r.comm) != TIDEGATE_OK) {
    std::fprintf(stderr, "soak: creating the communicator failed: %s\n", tidegate_last_error());
    return 1;
  }
  tidegate_comm_rank(r.comm, &r.rank);
  tidegate_comm_size(r.comm, &r.size);
  std::mt19937_64 draw(o.seed);  // the same sequence on every rank
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double last_sample = -1e9;
  bool stop = false;
  while (!stop && r.failed == 0) {
    const tidegate_dtype_t dtype = kDtypes[draw() % std::size(kDtypes)];
    const tidegate_reduce_op_t op = kOps[draw() % std::size(kOps)];
    // From 1 byte to 32 MiB: a power of two 2^0..2^24, then uniform up to twice it.
    const int64_t bytes = int64_t{1} << (draw() % 25);
    const int64_t count =
        elements(bytes + static_cast<int64_t>(draw() % static_cast<uint64_t>(bytes)), dtype);
    const int root = static_cast<int>(draw() % static_cast<uint64_t>(r.size));
    switch (draw() % 10) {
      case 0:
      case 1:
      case 2:
        run_allreduce(r, dtype, op, count);
        break;
      case 3:
        run_window(r, dtype, op, std::min<int64_t>(count, int64_t{1} << 18));
        break;
      case 4:
        run_reduce_scatter(r, dtype, op, count);
        break;
      case 5:
        run_allgather(r, dtype, std::max<int64_t>(1, count / r.size));
        break;
      case 6:
        run_broadcast(r, dtype, count, root);
        break;
      case 7:
      case 8:
        tidegate::soak::run_compressed(r, draw);
        break;
      default:
        if (const tidegate_status_t st = tidegate_barrier(r.comm); st != TIDEGATE_OK) {
          report_failure(r, "barrier", st);
        }
        break;
    }
    ++r.ops;
    // Every 32 ops the ranks agree (one small allreduce) on stopping, decided by rank 0's
    // clock, so that every rank stops after the same op.
    if (r.ops % 32 == 0) {
      int32_t stop_now = r.rank == 0 && elapsed() >= o.minutes * 60 ? 1 : 0;
      tidegate_tensor_t t = tidegate_host_tensor(&stop_now, 1, TIDEGATE_INT32);
      if (const tidegate_status_t st = tidegate_allreduce(r.comm, &t, &t, TIDEGATE_MAX);
          st != TIDEGATE_OK) {
        report_failure(r, "stop agreement", st);
        break;
      }
      stop = stop_now != 0;
    }
    if (elapsed() - last_sample >= o.sample_s) {  // each rank on its own clock
      last_sample = elapsed();
      sample(r, elapsed());
    }
  }
  sample(r, elapsed());
  std::printf("soak-done rank %d ops %llu wrong %llu failed %llu seconds %.0f\n", r.rank,
              static_cast<unsigned long long>(r.ops), static_cast<unsigned long long>(r.wrong),
              static_cast<unsigned long long>(r.failed), elapsed());
  std::fflush(stdout);
  const tidegate_status_t destroyed = tidegate_comm_destroy(r.comm);
  return r.wrong == 0 && r.failed == 0 && destroyed == TIDEGATE_OK ? 0 : 1;
}
