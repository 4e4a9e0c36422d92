// tidegate-codec-bench: encode, decode and decode_add throughput of every codec at 1 Mi and
// 64 Mi float32 elements, with memcpy of the same size measured in the same binary. Every result
// carries
//   GBps             tensor bytes (count x 4) per second, for encode and for decode alike
//   memcpy_fraction  GBps / the memcpy GB/s of the same size in this run
//   ratio            (encode only) tensor bytes / payload bytes: the compression ratio
// Single-threaded (EncodeContext::threads = 1). Rates are per second of the benchmark thread's
// CPU time (CLOCK_THREAD_CPUTIME_ID), for memcpy and codecs alike: on a machine shared with
// other jobs, time spent waiting for a core would otherwise count as codec time, differently
// for each benchmark. On an idle machine the two clocks agree. Google Benchmark's own flags
// apply, e.g.
//   tidegate-codec-bench --benchmark_filter='encode/.*/67108864' --benchmark_repetitions=3
//
// Adding a codec: append its spec to kBenchCodecs (with the row count for matrix codecs).
//
// Also here, as the other numeric kernel a compressed exchange runs: sfb_products/K/M/N, the
// sum of outer products a sufficient-factor allreduce forms (numeric/outer_product.h) from four
// blocks of K/4 factor rows, reported as Gmacs (G multiply-adds per second of CPU time).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "compress/stochastic.h"
#include "numeric/outer_product.h"

namespace tidegate {
namespace {

struct BenchCodec {
  const char* spec;
  int64_t rows = 0;  // matrix codecs: the tensor is rows x (count / rows); 0 for 1-D codecs
};

// One line per codec configuration to measure.
const BenchCodec kBenchCodecs[] = {
    {"none"},
    {"fp16"},
    {"bf16"},
    {"qsgd:bits=4,bucket=512"},
    {"qsgd:bits=8,bucket=512"},
    {"maxmin:bits=4,bucket=512,rounding=stochastic"},
    {"maxmin:bits=4,bucket=512,rounding=nearest"},
    {"maxmin:bits=8,bucket=512,rounding=stochastic"},
    {"terngrad:bucket=512"},
    {"signsgd"},
    {"efsign"},
    {"onebit:bucket=512"},
    {"topk:ratio=0.01,mode=exact"},
    {"topk:ratio=0.01,mode=approx"},
    {"randomk:ratio=0.01,unbiased=0"},
    {"threshold:value=0.0024"},  // keeps ~1% of this input (|x| up to 3.4e-3)
    {"powersgd:rank=4", 1024},   // 1024 x 1024 and 1024 x 65536
};

const int64_t kSizes[] = {int64_t{1} << 20, int64_t{1} << 26};

// Buffers shared by every benchmark of one size, touched once so page faults stay out of the
// timings: input (gradient-like values), a second tensor (memcpy target, decode output) and a
// payload buffer as large as the input plus headroom.
struct Buffers {
  std::vector<float> input, output;
  std::vector<uint8_t> payload;
};

Buffers& buffers(int64_t count) {
  static std::map<int64_t, std::unique_ptr<Buffers>> cache;
  auto& slot = cache[count];
  if (!slot) {
    slot = std::make_unique<Buffers>();
    slot->input.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {  // roughly normal, sigma ~ 1e-3, a few exact zeros
      const uint64_t r = splitmix64(static_cast<uint64_t>(i));
      const float sum = static_cast<float>(r & 0xffff) + static_cast<float>((r >> 16) & 0xffff) +
                        static_cast<float>((r >> 32) & 0xffff) + static_cast<float>(r >> 48);
      slot->input[static_cast<size_t>(i)] =
          (r % 97 == 0) ? 0.0f : (sum / 65536.0f - 2.0f) * 1.7e-3f;
    }
    slot->output.assign(static_cast<size_t>(count), 0.0f);
    slot->payload.assign(static_cast<size_t>(count) * sizeof(float) + (size_t{1} << 20), 0);
  }
  return *slot;
}

std::map<int64_t, double>& memcpy_gbps() {
  static std::map<int64_t, double> measured;
  return measured;
}

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(double start) { return cpu_now() - start; }

// memcpy GB/s for `count` floats: the BM_memcpy result when it ran, else a quick measurement
// (so a filtered run still reports memcpy_fraction).
double reference_gbps(int64_t count) {
  auto it = memcpy_gbps().find(count);
  if (it != memcpy_gbps().end()) return it->second;
  Buffers& b = buffers(count);
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const int reps = count >= (int64_t{1} << 24) ? 5 : 200;
  std::memcpy(b.output.data(), b.input.data(), bytes);
  const double start = cpu_now();
  for (int r = 0; r < reps; ++r) {
    std::memcpy(b.output.data(), b.input.data(), bytes);
    benchmark::ClobberMemory();
  }
  const double gbps = static_cast<double>(bytes) * reps / seconds_since(start) / 1e9;
  memcpy_gbps()[count] = gbps;
  return gbps;
}

void set_rate(benchmark::State& state, int64_t count, double seconds, bool is_memcpy) {
  const double bytes =
      static_cast<double>(count) * sizeof(float) * static_cast<double>(state.iterations());
  const double gbps = bytes / seconds / 1e9;
  if (is_memcpy) memcpy_gbps()[count] = gbps;
  state.counters["GBps"] = gbps;
  state.counters["memcpy_fraction"] = gbps / reference_gbps(count);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void bm_memcpy(benchmark::State& state, int64_t count) {
  Buffers& b = buffers(count);
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const double start = cpu_now();
  for (auto _ : state) {
    std::memcpy(b.output.data(), b.input.data(), bytes);
    benchmark::ClobberMemory();
  }
  set_rate(state, count, seconds_since(start), true);
}

TensorView tensor_of(std::vector<float>& data, int64_t rows) {
  TensorView t;
  t.data = data.data();
  t.count = static_cast<int64_t>(data.size());
  t.dtype = TIDEGATE_FLOAT32;
  if (rows > 0) {
    t.rows = rows;
    t.cols = t.count / rows;
  }
  return t;
}

bool make(const BenchCodec& entry, benchmark::State& state, std::unique_ptr<Codec>* codec) {
  Status st = make_codec(entry.spec, codec);
  if (!st.is_ok()) state.SkipWithError(st.to_string().c_str());
  return st.is_ok();
}

void bm_encode(benchmark::State& state, BenchCodec entry, int64_t count) {
  std::unique_ptr<Codec> codec;
  if (!make(entry, state, &codec)) return;
  Buffers& b = buffers(count);
  const TensorView input = tensor_of(b.input, entry.rows);
  EncodeContext context;
  size_t written = 0;
  const double start = cpu_now();
  for (auto _ : state) {
    context.seed += 1;
    Status st = codec->encode(input, context, b.payload.data(), b.payload.size(), &written);
    if (!st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  set_rate(state, count, seconds_since(start), false);
  state.counters["ratio"] =
      static_cast<double>(count) * sizeof(float) / static_cast<double>(written);
}

// decode (overwrite: a dense pass over the output for every codec) or decode_add (how a
// collective sums payloads: sparse codecs touch only their entries).
void bm_decode(benchmark::State& state, BenchCodec entry, int64_t count, bool add) {
  std::unique_ptr<Codec> codec;
  if (!make(entry, state, &codec)) return;
  Buffers& b = buffers(count);
  size_t written = 0;
  Status st = codec->encode(tensor_of(b.input, entry.rows), EncodeContext{}, b.payload.data(),
                            b.payload.size(), &written);
  if (!st.is_ok()) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  const TensorView output = tensor_of(b.output, entry.rows);
  const double start = cpu_now();
  for (auto _ : state) {
    st = add ? codec->decode_add(b.payload.data(), written, output)
             : codec->decode(b.payload.data(), written, output);
    if (!st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  set_rate(state, count, seconds_since(start), false);
}

// Four ranks' factors of K/4 rows each, summed into one M x N matrix, as every rank does in
// tidegate_sfb_allreduce.
void bm_sfb_products(benchmark::State& state, int64_t k, int64_t m, int64_t n) {
  std::vector<float> u(static_cast<size_t>(k * m)), v(static_cast<size_t>(k * n)),
      out(static_cast<size_t>(m * n));
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11f * static_cast<float>(i));
  std::vector<FactorBlock> blocks;
  for (int64_t b = 0; b < 4; ++b) {
    blocks.push_back({u.data() + b * (k / 4) * m, v.data() + b * (k / 4) * n, k / 4});
  }
  const double start = cpu_now();
  for (auto _ : state) {
    sum_outer_products(blocks.data(), 4, m, n, out.data());
    benchmark::ClobberMemory();
  }
  const double macs = static_cast<double>(k * m * n) * static_cast<double>(state.iterations());
  state.counters["Gmacs"] = macs / seconds_since(start) / 1e9;
}

// memcpy first, so that in an unfiltered run the fractions use the benchmark's own result.
void register_all() {
  for (int64_t count : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + std::to_string(count)).c_str(),
                                 [count](benchmark::State& state) { bm_memcpy(state, count); })
        ->Unit(benchmark::kMillisecond);
  }
  for (const std::string op : {"encode", "decode", "decode_add"}) {
    for (const BenchCodec& entry : kBenchCodecs) {
      for (int64_t count : kSizes) {
        const std::string name = op + "/" + entry.spec + "/" + std::to_string(count);
        auto* bench =
            benchmark::RegisterBenchmark(name.c_str(), [op, entry, count](benchmark::State& state) {
              if (op == "encode") {
                bm_encode(state, entry, count);
              } else {
                bm_decode(state, entry, count, op == "decode_add");
              }
            });
        bench->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::RegisterBenchmark("sfb_products/128/4096/4096", [](benchmark::State& state) {
    bm_sfb_products(state, 128, 4096, 4096);
  })->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace tidegate

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tidegate::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
