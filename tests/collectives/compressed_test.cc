// The compressed allreduces (src/collectives/compressed/): every algorithm x its codecs x ranks
// {1..5} x sizes {0, 1, 7, 1023, 2^20+3}, on ranks as threads over the loopback transport (and
// tcp and ucx as an axis): results bitwise identical on every rank; equal, element for element,
// to the reference built from the same decoded payloads where the codec is deterministic; within
// a stated bound of the exact sum where it is stochastic; float32, float16 and bfloat16 tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/compressed/compression_state.h"
#include "compressed_reference.h"
#include "test_cases.h"

namespace tidegate::testing {
namespace {

struct CompressedCase {
  std::string algorithm;
  std::string codec;
  int ranks = 1;
  int64_t count = 0;
  std::string transport = kLoopback;
};

// The 2-D shape PowerSGD gets for a count (0 x 0: no shape, the tensor is allreduced dense).
std::pair<int64_t, int64_t> shape_of(int64_t count) {
  if (count == 1023) return {31, 33};
  if (count == (int64_t{1} << 20) + 3) return {1141, 919};
  return {0, 0};
}

bool deterministic(const std::string& codec) {
  return codec.rfind("qsgd", 0) != 0 && codec.rfind("terngrad", 0) != 0 &&
         codec.rfind("randomk", 0) != 0 && codec.find("stochastic") == std::string::npos;
}

// One step of the compressed allreduce on every rank; outputs[r] gets rank r's result bytes.
struct Step {
  const CompressedCase& c;
  tidegate_dtype_t dtype;
  tidegate_reduce_op_t op;
  bool error_feedback = false;
  std::vector<CompressionState>* states = nullptr;  // per rank; a fresh one when null
  uint64_t step = 0;

  std::vector<Status> run(const std::vector<Floats>& inputs, std::vector<Bytes>* outputs,
                          const Config& config) const {
    std::unique_ptr<Codec> made;
    EXPECT_TRUE(make_codec(c.codec, &made).is_ok()) << c.codec;
    std::shared_ptr<const Codec> codec(std::move(made));
    std::vector<CompressionState> fresh(static_cast<size_t>(c.ranks));
    std::vector<CompressionState>& state = states != nullptr ? *states : fresh;
    std::vector<Bytes> in(static_cast<size_t>(c.ranks));
    outputs->assign(static_cast<size_t>(c.ranks), Bytes());
    for (int r = 0; r < c.ranks; ++r) {
      in[r] = to_bytes(dtype, inputs[r]);
      (*outputs)[r].assign(in[r].size(), 0xcd);
    }
    const auto [rows, cols] = shape_of(c.count);
    RunOptions options;
    options.transport = c.transport;
    return run_ranks(
        c.ranks, config,
        [&](const TaskContext& base) {
          TaskContext context = base;
          context.compression = &state[static_cast<size_t>(base.rank)];
          CollectiveArgs args;
          args.kind = OpKind::kAllreduce;
          args.op_seq = 7 + step;
          args.reduce_op = op;
          args.input = view(in[base.rank].data(), c.count, dtype);
          args.input.rows = rows;
          args.input.cols = cols;
          args.output = view((*outputs)[base.rank].data(), c.count, dtype);
          args.compression.codec = codec;
          args.compression.key = 11;
          args.compression.error_feedback = error_feedback;
          args.compression.algorithm = c.algorithm;
          args.compression.step = context.compression->next_step(11);
          return run_collective(context, args, Deadline::after_ms(120000));
        },
        options);
  }
};

// Element-wise equality (so that -0 == +0: a merged sparse region drops signed zeros).
void expect_equal_values(const Floats& got, const Floats& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      FAIL() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
}

void check_values(const CompressedCase& c, const Codec& codec, tidegate_dtype_t dtype, bool average,
                  const std::vector<Floats>& inputs, const Floats& got, const Config& config,
                  const std::string& what) {
  const std::vector<double> exact = exact_sum(inputs, average);
  const int64_t segment = config.segment_bytes() / 4;
  if (c.algorithm == "allgather" || c.algorithm == "sparse_reduce_scatter") {
    if (deterministic(c.codec)) {
      expect_equal_values(got, round_to(dtype, sum_of_decoded(codec, inputs, average)), what);
      return;
    }
    // Random-k with per-rank indices: each element is the sum of the ranks that kept it.
    for (size_t i = 0; i < got.size(); ++i) {
      double bound = 0;
      for (const Floats& x : inputs) bound += std::fabs(x[i]);
      if (average) bound /= static_cast<double>(inputs.size());
      ASSERT_LE(std::fabs(got[i]), bound * 1.01 + 1e-6) << what << ": element " << i;
    }
  } else if (c.algorithm == "sra") {
    if (deterministic(c.codec)) {
      expect_equal_values(got, round_to(dtype, sra_result(codec, inputs, segment, average)), what);
      return;
    }
    // qsgd 4-bit, terngrad, stochastic maxmin: the stated error bounds of one quantisation by
    // the sender and one by the owner, as a relative L2 error on these gradients.
    const double bound = c.codec.rfind("terngrad", 0) == 0 ? 3.0 : 1.0;
    EXPECT_LE(relative_l2(got, exact), bound) << what;
  } else if (c.algorithm == "summable") {
    expect_equal_values(got, majority_vote(inputs), what);
  } else if (c.algorithm == "shared_randomk") {
    // Every rank kept the same indices: there the exact sum, elsewhere zero.
    size_t kept = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == 0.0f) continue;
      ++kept;
      ASSERT_NEAR(got[i], exact[i], 1e-2 * std::fabs(exact[i]) + 1e-6) << what << " element " << i;
    }
    EXPECT_LE(kept, static_cast<size_t>(std::ceil(0.01 * static_cast<double>(got.size()))) + 1)
        << what;
  } else if (c.algorithm == "powersgd") {
    // Without a 2-D shape, or too small to factor, the tensor goes dense: the exact sum.
    const auto [rows, cols] = shape_of(c.count);
    if (rows == 0) {
      EXPECT_LE(relative_l2(got, exact), dtype == TIDEGATE_FLOAT32 ? 1e-6 : 1e-2) << what;
    } else {
      EXPECT_LE(relative_l2(got, exact), 1.0) << what;  // a rank-r approximation, not garbage
    }
  }
}

class CompressedAllreduce : public ::testing::TestWithParam<CompressedCase> {};

TEST_P(CompressedAllreduce, IdenticalOnEveryRankAndRight) {
  const CompressedCase& c = GetParam();
  std::unique_ptr<Codec> codec;
  ASSERT_TRUE(make_codec(c.codec, &codec).is_ok());
  const Config config;
  struct Variant {
    tidegate_dtype_t dtype;
    tidegate_reduce_op_t op;
  };
  std::vector<Variant> variants = {{TIDEGATE_FLOAT32, TIDEGATE_SUM}};
  if (c.count <= 1023) {
    variants.push_back({TIDEGATE_FLOAT16, TIDEGATE_AVG});
    variants.push_back({TIDEGATE_BFLOAT16, TIDEGATE_SUM});
  } else {
    variants.push_back({TIDEGATE_FLOAT32, TIDEGATE_AVG});
  }
  for (const Variant& v : variants) {
    const std::string what = c.algorithm + " " + c.codec + " " + dtype_name(v.dtype) + " " +
                             reduce_op_name(v.op) + " P=" + std::to_string(c.ranks) +
                             " N=" + std::to_string(c.count);
    std::vector<Floats> inputs;
    for (int r = 0; r < c.ranks; ++r) inputs.push_back(round_to(v.dtype, gradient(r, c.count, 0)));
    std::vector<Bytes> outputs;
    const std::vector<Status> results = Step{c, v.dtype, v.op}.run(inputs, &outputs, config);
    for (int r = 0; r < c.ranks; ++r) {
      ASSERT_TRUE(results[r].is_ok()) << what << ": rank " << r << ": " << results[r].to_string();
    }
    for (int r = 1; r < c.ranks; ++r) {
      ASSERT_TRUE(outputs[r] == outputs[0]) << what << ": rank " << r << " differs from rank 0";
    }
    check_values(c, *codec, v.dtype, v.op == TIDEGATE_AVG, inputs, from_bytes(v.dtype, outputs[0]),
                 config, what);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::vector<std::pair<std::string, std::string>> algorithm_codecs() {
  return {
      {"allgather", "topk:ratio=0.01"},
      {"allgather", "threshold:value=0.005"},
      {"allgather", "randomk:ratio=0.01"},
      {"allgather", "fp16"},
      {"sparse_reduce_scatter", "topk:ratio=0.01"},
      {"sparse_reduce_scatter", "threshold:value=0.005"},
      {"sparse_reduce_scatter", "randomk:ratio=0.01"},
      {"shared_randomk", "randomk:ratio=0.01"},
      {"sra", "fp16"},
      {"sra", "bf16"},
      {"sra", "qsgd:bits=4,bucket=512"},
      {"sra", "maxmin:bits=4,bucket=512,rounding=nearest"},
      {"sra", "maxmin:bits=4,bucket=512,rounding=stochastic"},
      {"sra", "terngrad"},
      {"sra", "onebit"},
      {"sra", "efsign"},
      {"summable", "signsgd"},
      {"powersgd", "powersgd:rank=2"},
  };
}

std::vector<CompressedCase> cases(const std::string& transport, bool reduced) {
  std::vector<CompressedCase> out;
  for (const auto& [algorithm, codec] : algorithm_codecs()) {
    for (int ranks : world_sizes()) {
      if (reduced && ranks != 3) continue;
      for (int64_t count : element_counts()) {
        // The large size on 1, 3 and 5 ranks: 2 and 4 add nothing the small sizes miss.
        if (count == kLargeCount && (ranks == 2 || ranks == 4)) continue;
        out.push_back({algorithm, codec, ranks, count, transport});
      }
    }
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<CompressedCase>& info) {
  std::string codec = info.param.codec;
  for (char& ch : codec) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return info.param.algorithm + "_" + codec + "_P" + std::to_string(info.param.ranks) + "_N" +
         std::to_string(info.param.count);
}

INSTANTIATE_TEST_SUITE_P(loopback, CompressedAllreduce,
                         ::testing::ValuesIn(cases(kLoopback, false)), case_name);
INSTANTIATE_TEST_SUITE_P(tcp, CompressedAllreduce, ::testing::ValuesIn(cases("tcp", true)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(ucx, CompressedAllreduce, ::testing::ValuesIn(cases("ucx", true)),
                         case_name);

}  // namespace
}  // namespace tidegate::testing
