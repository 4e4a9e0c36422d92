// Error feedback through the compressed collectives, and payloads that do not decode:
//  - for ten steps, the sum over steps of what arrived plus every residual left (the senders'
//    and the owners') equals the sum of the inputs, for each algorithm that sums;
//  - a saved state restored reproduces the next step bit for bit (stochastic codecs included);
//  - a payload from a peer that is truncated, of another codec, or with indices out of range
//    fails the op on the receiving rank with an error naming that peer, and no residual of the
//    receiving rank is touched by it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/compressed/compression_state.h"
#include "compress/payload.h"
#include "compressed_reference.h"
#include "test_cases.h"

namespace tidegate::testing {
namespace {

constexpr uint64_t kKey = 21;

struct Job {
  std::string algorithm;
  std::string codec;
  int ranks = 3;
  int64_t count = 4099;
  int64_t rows = 0, cols = 0;
  tidegate_reduce_op_t op = TIDEGATE_SUM;
};

std::shared_ptr<const Codec> codec_of(const std::string& spec) {
  std::unique_ptr<Codec> made;
  EXPECT_TRUE(make_codec(spec, &made).is_ok()) << spec;
  return std::shared_ptr<const Codec>(std::move(made));
}

// One step on every rank with error feedback on, the tensors in `dtype` (inputs rounded to
// it); results in outputs (as float32).
std::vector<Status> step(const Job& job, const std::shared_ptr<const Codec>& codec,
                         std::vector<CompressionState>& states, const std::vector<Floats>& inputs,
                         std::vector<Floats>* outputs, uint64_t op_seq,
                         const RunOptions& options = {},
                         tidegate_dtype_t dtype = TIDEGATE_FLOAT32) {
  std::vector<Bytes> in, out;
  for (const Floats& x : inputs) {
    in.push_back(to_bytes(dtype, x));
    out.push_back(Bytes(in.back().size()));
  }
  const std::vector<Status> results = run_ranks(
      job.ranks, Config(),
      [&](const TaskContext& base) {
        TaskContext context = base;
        context.compression = &states[static_cast<size_t>(base.rank)];
        CollectiveArgs args;
        args.kind = OpKind::kAllreduce;
        args.op_seq = op_seq;
        args.reduce_op = job.op;
        args.input = view(in[base.rank].data(), job.count, dtype);
        args.input.rows = job.rows;
        args.input.cols = job.cols;
        args.output = view(out[base.rank].data(), job.count, dtype);
        args.compression.codec = codec;
        args.compression.key = kKey;
        args.compression.error_feedback = true;
        args.compression.algorithm = job.algorithm;
        args.compression.step = context.compression->next_step(kKey);
        return run_collective(context, args, Deadline::after_ms(60000));
      },
      options);
  outputs->clear();
  for (const Bytes& bytes : out) outputs->push_back(from_bytes(dtype, bytes));
  return results;
}

// A residual store's values for the key (zeros when it has none).
std::vector<double> residual_of(ResidualStore& store, int64_t count) {
  std::vector<double> values;
  if (!store.residual(kKey, &values).is_ok()) values.assign(static_cast<size_t>(count), 0.0);
  return values;
}

// Two saved compression states (CompressionState::save) hold the same residuals of the key,
// the sender's and the owner's.
void expect_same_residuals(const std::vector<uint8_t>& before, const std::vector<uint8_t>& after,
                           int64_t count) {
  CompressionState a, b;
  ASSERT_TRUE(a.load(before.data(), before.size()).is_ok());
  ASSERT_TRUE(b.load(after.data(), after.size()).is_ok());
  EXPECT_EQ(residual_of(a.sender(), count), residual_of(b.sender(), count));
  EXPECT_EQ(residual_of(a.owner(), count), residual_of(b.owner(), count));
}

class FeedbackInvariant : public ::testing::TestWithParam<Job> {};

TEST_P(FeedbackInvariant, ArrivedPlusResidualsEqualsTheInputsOverTenSteps) {
  const Job& job = GetParam();
  const auto codec = codec_of(job.codec);
  std::vector<CompressionState> states(static_cast<size_t>(job.ranks));
  std::vector<double> inputs_total(static_cast<size_t>(job.count), 0.0);
  std::vector<double> arrived_total(static_cast<size_t>(job.count), 0.0);
  const double in_sum_domain = job.op == TIDEGATE_AVG ? job.ranks : 1;
  for (int t = 0; t < 10; ++t) {
    std::vector<Floats> inputs;
    for (int r = 0; r < job.ranks; ++r) {
      inputs.push_back(gradient(r, job.count, static_cast<uint64_t>(t)));
      for (int64_t i = 0; i < job.count; ++i) inputs_total[i] += inputs[r][i];
    }
    std::vector<Floats> outputs;
    const std::vector<Status> results = step(job, codec, states, inputs, &outputs, 100 + t);
    for (const Status& st : results) ASSERT_TRUE(st.is_ok()) << st.to_string();
    for (int r = 1; r < job.ranks; ++r) ASSERT_TRUE(outputs[r] == outputs[0]) << "step " << t;
    for (int64_t i = 0; i < job.count; ++i) arrived_total[i] += outputs[0][i] * in_sum_domain;
  }
  std::vector<double> left(static_cast<size_t>(job.count), 0.0);
  for (CompressionState& state : states) {
    const std::vector<double> sender = residual_of(state.sender(), job.count);
    const std::vector<double> owner = residual_of(state.owner(), job.count);
    for (int64_t i = 0; i < job.count; ++i) left[i] += sender[i] + owner[i];
  }
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < job.count; ++i) {
    worst = std::max(worst, std::fabs(arrived_total[i] + left[i] - inputs_total[i]));
    scale = std::max(scale, std::fabs(inputs_total[i]));
  }
  // float32 sums over 10 steps and a few ranks: a few ulps of the largest value.
  EXPECT_LE(worst, 1e-5 * scale + 1e-6) << job.algorithm << " " << job.codec;
}

std::vector<Job> feedback_jobs() {
  return {
      {"allgather", "topk:ratio=0.01"},
      {"sparse_reduce_scatter", "topk:ratio=0.05"},
      {"shared_randomk", "randomk:ratio=0.02"},
      {"sra", "qsgd:bits=4,bucket=512", 3, 4099, 0, 0, TIDEGATE_AVG},
      {"sra", "onebit", 4, 70000},
      {"sra", "maxmin:bits=2,bucket=64,rounding=nearest"},
      {"powersgd", "powersgd:rank=2", 3, 64 * 48, 64, 48, TIDEGATE_AVG},
  };
}

std::string job_name(const ::testing::TestParamInfo<Job>& info) {
  std::string name = info.param.algorithm + "_" + info.param.codec;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Codecs, FeedbackInvariant, ::testing::ValuesIn(feedback_jobs()), job_name);

TEST(FeedbackCheckpoint, RestoredStateRepeatsTheNextStepBitForBit) {
  for (const Job& job : {Job{"sra", "qsgd:bits=4,bucket=512"},
                         Job{"powersgd", "powersgd:rank=2", 3, 64 * 48, 64, 48},
                         Job{"sra", "maxmin:bits=4,bucket=128,rounding=stochastic"}}) {
    SCOPED_TRACE(job.codec);
    const auto codec = codec_of(job.codec);
    std::vector<CompressionState> states(static_cast<size_t>(job.ranks));
    std::vector<Floats> outputs;
    auto inputs_of = [&](int t) {
      std::vector<Floats> inputs;
      for (int r = 0; r < job.ranks; ++r) inputs.push_back(gradient(r, job.count, t));
      return inputs;
    };
    for (int t = 0; t < 3; ++t) step(job, codec, states, inputs_of(t), &outputs, t);
    std::vector<std::vector<uint8_t>> saved(static_cast<size_t>(job.ranks));
    for (int r = 0; r < job.ranks; ++r) ASSERT_TRUE(states[r].save(&saved[r]).is_ok());
    std::vector<Floats> next;
    step(job, codec, states, inputs_of(3), &next, 3);
    // A new job (new states) restored from the checkpoint takes the same step.
    std::vector<CompressionState> restored(static_cast<size_t>(job.ranks));
    for (int r = 0; r < job.ranks; ++r) {
      ASSERT_TRUE(restored[r].load(saved[r].data(), saved[r].size()).is_ok());
    }
    std::vector<Floats> again;
    step(job, codec, restored, inputs_of(3), &again, 50);
    for (int r = 0; r < job.ranks; ++r) {
      ASSERT_EQ(std::memcmp(again[r].data(), next[r].data(), next[r].size() * sizeof(float)), 0)
          << "rank " << r;
    }
    // Without the state, the step differs (so the check above means something).
    std::vector<CompressionState> fresh(static_cast<size_t>(job.ranks));
    std::vector<Floats> cold;
    step(job, codec, fresh, inputs_of(3), &cold, 60);
    EXPECT_NE(std::memcmp(cold[0].data(), next[0].data(), next[0].size() * sizeof(float)), 0);
  }
}

// Rewrites this rank's sends of bounded (compressed) payloads before they leave.
class CorruptingTransport : public Transport {
 public:
  enum class Damage { kTruncate, kCodecByte, kIndexOutOfRange };
  CorruptingTransport(Transport* inner, Damage damage) : inner_(inner), damage_(damage) {}

  const char* name() const override { return inner_->name(); }
  TransportCapabilities capabilities() const override { return inner_->capabilities(); }
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override {
    if (!header.bounded_payload() || bytes < kPayloadHeaderBytes) {
      return inner_->isend(peer, channel, header, payload, bytes, handle);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.emplace_back(static_cast<const uint8_t*>(payload),
                       static_cast<const uint8_t*>(payload) + bytes);
    std::vector<uint8_t>& copy = kept_.back();
    if (damage_ == Damage::kTruncate) copy.resize(copy.size() - 3);
    if (damage_ == Damage::kCodecByte) copy[3] ^= 0x5a;  // PayloadHeader's codec id
    if (damage_ == Damage::kIndexOutOfRange) {
      // A sparse payload's first packed index (after the 25-byte prefix): all ones.
      for (size_t i = 25; i < std::min<size_t>(copy.size(), 29); ++i) copy[i] = 0xff;
    }
    WireHeader sent = header;
    sent.payload_bytes = copy.size();
    return inner_->isend(peer, channel, sent, copy.data(), copy.size(), handle);
  }
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override {
    return inner_->irecv(peer, channel, expected, payload, bytes, handle);
  }
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override {
    return inner_->test(handle, done, payload_bytes);
  }
  Status progress(Milliseconds max_wait, bool* activity) override {
    return inner_->progress(max_wait, activity);
  }
  void wake() override { inner_->wake(); }
  void abort(const Status& reason) override { inner_->abort(reason); }
  Status close(Deadline deadline) override { return inner_->close(deadline); }

 private:
  Transport* inner_;
  Damage damage_;
  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> kept_;
};

TEST(MalformedPayloads, FailTheOpNamingThePeerAndLeaveResidualsAlone) {
  struct Case {
    std::string algorithm, codec;
    CorruptingTransport::Damage damage;
  };
  const Case cases[] = {
      {"allgather", "topk:ratio=0.01", CorruptingTransport::Damage::kTruncate},
      {"allgather", "topk:ratio=0.01", CorruptingTransport::Damage::kIndexOutOfRange},
      {"sparse_reduce_scatter", "topk:ratio=0.01", CorruptingTransport::Damage::kCodecByte},
      {"sra", "qsgd:bits=4,bucket=512", CorruptingTransport::Damage::kTruncate},
      {"sra", "fp16", CorruptingTransport::Damage::kCodecByte},
      {"summable", "signsgd", CorruptingTransport::Damage::kTruncate},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.algorithm + " " + c.codec);
    const int ranks = 3;
    const int64_t count = 5000;
    const auto codec = codec_of(c.codec);
    std::vector<CompressionState> states(ranks);
    std::vector<Floats> inputs;
    for (int r = 0; r < ranks; ++r) inputs.push_back(gradient(r, count, 0));
    // The honest run: what each rank's own residual must be after the op (it depends only on
    // the rank's own input, whatever its peers send).
    std::vector<CompressionState> honest(ranks);
    std::vector<Floats> honest_out;
    const Job job{c.algorithm, c.codec, ranks, count};
    for (const Status& st : step(job, codec, honest, inputs, &honest_out, 1)) {
      ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
    std::vector<Floats> outputs(ranks, Floats(count));
    const std::vector<Status> results = run_ranks(ranks, Config(), [&](const TaskContext& base) {
      TaskContext context = base;
      context.compression = &states[base.rank];
      // Rank 1 sends damaged payloads.
      std::unique_ptr<CorruptingTransport> corrupting;
      if (base.rank == 1) {
        corrupting = std::make_unique<CorruptingTransport>(base.transport, c.damage);
        context.transport = corrupting.get();
      }
      CollectiveArgs args;
      args.kind = OpKind::kAllreduce;
      args.op_seq = 1;
      args.reduce_op = TIDEGATE_SUM;
      args.input = view(inputs[base.rank].data(), count, TIDEGATE_FLOAT32);
      args.output = view(outputs[base.rank].data(), count, TIDEGATE_FLOAT32);
      args.compression.codec = codec;
      args.compression.key = kKey;
      args.compression.error_feedback = true;
      args.compression.algorithm = c.algorithm;
      args.compression.step = context.compression->next_step(kKey);
      return run_collective(context, args, Deadline::after_ms(20000));
    });
    bool named = false;
    for (int r = 0; r < ranks; ++r) {
      // (Rank 1 itself may finish before its peers' abort reaches it: it got good payloads.)
      if (r == 1) continue;
      EXPECT_FALSE(results[r].is_ok()) << "rank " << r;
      named = named || results[r].message().find("rank 1") != std::string::npos;
      // No byte of rank 1's damaged payloads reached a residual of the ranks that got them.
      if (states[r].sender().has(kKey)) {
        EXPECT_EQ(residual_of(states[r].sender(), count), residual_of(honest[r].sender(), count))
            << "rank " << r;
      }
      EXPECT_FALSE(states[r].owner().has(kKey)) << "rank " << r << " kept an owner residual";
    }
    EXPECT_TRUE(named) << results[0].to_string();
    EXPECT_EQ(
        results[0].code() == TIDEGATE_ERR_PROTOCOL || results[2].code() == TIDEGATE_ERR_PROTOCOL,
        true)
        << results[0].to_string() << " | " << results[2].to_string();
  }
}

// The allgather keeps a sparse codec's residual in place (Codec::decode_subtract): it must be
// bit for bit what the dense update gives, (input + residual) - decode(encode(input + residual)),
// step after step, with -0.0 in inputs and in residuals (set as a restored checkpoint could),
// and for float16 and bfloat16 tensors.
TEST(SparseFeedbackInPlace, ResidualIsTheDenseUpdateBitForBit) {
  for (const tidegate_dtype_t dtype : {TIDEGATE_FLOAT32, TIDEGATE_FLOAT16, TIDEGATE_BFLOAT16}) {
    for (const std::string spec : {"topk:ratio=0.02", "threshold:value=0.5"}) {
      const auto codec = codec_of(spec);
      const Job job{"allgather", spec, 3, 4099};
      std::vector<CompressionState> states(static_cast<size_t>(job.ranks));
      std::vector<Floats> expected(static_cast<size_t>(job.ranks),
                                   Floats(static_cast<size_t>(job.count), 0.0f));
      for (uint64_t t = 0; t < 4; ++t) {
        if (t == 2) {  // -0.0 residuals: kept where nothing is sent, -0.0 + -0.0 stays -0.0
          for (int r = 0; r < job.ranks; ++r) {
            float* residual = nullptr;
            ASSERT_TRUE(states[r].sender().float_residual(kKey, job.count, &residual).is_ok());
            for (int64_t i = 0; i < job.count; i += 17) residual[i] = expected[r][i] = -0.0f;
          }
        }
        std::vector<Floats> inputs;
        for (int r = 0; r < job.ranks; ++r) {
          inputs.push_back(gradient(r, job.count, t));
          for (int64_t i = 0; i < job.count; i += 13) inputs[r][i] = -0.0f;
          const Floats held = round_to(dtype, inputs[r]);  // what the tensor holds
          Floats compensated(static_cast<size_t>(job.count));
          for (int64_t i = 0; i < job.count; ++i) compensated[i] = held[i] + expected[r][i];
          const Floats sent = roundtrip(*codec, compensated.data(), job.count);
          for (int64_t i = 0; i < job.count; ++i) expected[r][i] = compensated[i] - sent[i];
        }
        std::vector<Floats> outputs;
        for (const Status& st : step(job, codec, states, inputs, &outputs, 200 + t, {}, dtype))
          ASSERT_TRUE(st.is_ok()) << st.to_string();
        for (int r = 0; r < job.ranks; ++r) {
          const std::vector<double> kept = residual_of(states[r].sender(), job.count);
          Floats got(kept.begin(), kept.end());  // float32 residuals: exact as doubles
          ASSERT_EQ(std::memcmp(got.data(), expected[r].data(), got.size() * sizeof(float)), 0)
              << spec << " dtype " << dtype << " step " << t << " rank " << r;
        }
      }
    }
  }
}

// A key's first op refused (a NaN) leaves no residual behind: a later flush into a dense send
// must find nothing to add (it would turn -0.0 into +0.0).
TEST(SparseFeedbackInPlace, ARefusedFirstOpLeavesNoResidual) {
  const Job job{"allgather", "topk:ratio=0.01", 2, 3000};
  const auto codec = codec_of(job.codec);
  std::vector<CompressionState> states(2);
  std::vector<Floats> inputs{gradient(0, job.count, 0), gradient(1, job.count, 0)};
  inputs[0][5] = NAN;
  std::vector<Floats> outputs;
  const std::vector<Status> results = step(job, codec, states, inputs, &outputs, 1);
  EXPECT_EQ(results[0].code(), TIDEGATE_ERR_INVALID_ARGUMENT) << results[0].to_string();
  EXPECT_FALSE(states[0].has_residual(kKey));
}

// An input whose sum with its residual overflows float32 is refused before the in-place
// residual changes, naming the element; a NaN likewise.
TEST(SparseFeedbackInPlace, OverflowAndNaNAreRefusedResidualsUnchanged) {
  const Job job{"allgather", "topk:ratio=0.01", 2, 3000};
  const auto codec = codec_of(job.codec);
  for (const bool nan : {false, true}) {
    std::vector<CompressionState> states(2);
    std::vector<Floats> inputs{gradient(0, job.count, 0), gradient(1, job.count, 0)};
    std::vector<Floats> outputs;
    for (const Status& st : step(job, codec, states, inputs, &outputs, 1)) ASSERT_TRUE(st.is_ok());
    float* residual = nullptr;
    ASSERT_TRUE(states[0].sender().float_residual(kKey, job.count, &residual).is_ok());
    residual[1717] = 3e38f;
    inputs[0][1717] = nan ? NAN : 3e38f;
    std::vector<uint8_t> before, after;
    ASSERT_TRUE(states[0].save(&before).is_ok());
    const std::vector<Status> results = step(job, codec, states, inputs, &outputs, 2);
    EXPECT_EQ(results[0].code(), TIDEGATE_ERR_INVALID_ARGUMENT) << results[0].to_string();
    EXPECT_NE(results[0].message().find("element 1717"), std::string::npos) << results[0].message();
    if (!nan) {
      EXPECT_NE(results[0].message().find("overflows"), std::string::npos) << results[0].message();
    }
    EXPECT_FALSE(results[1].is_ok());  // its peer aborted
    ASSERT_TRUE(states[0].save(&after).is_ok());
    expect_same_residuals(before, after, job.count);
  }
}

TEST(NonFiniteInput, RefusedNamingTheElementResidualsUnchanged) {
  const int ranks = 2;
  const int64_t count = 3000;
  const auto codec = codec_of("qsgd:bits=4,bucket=512");
  std::vector<CompressionState> states(ranks);
  Job job{"sra", "qsgd:bits=4,bucket=512", ranks, count};
  std::vector<Floats> inputs{gradient(0, count, 0), gradient(1, count, 0)};
  std::vector<Floats> outputs;
  for (const Status& st : step(job, codec, states, inputs, &outputs, 1)) ASSERT_TRUE(st.is_ok());
  std::vector<uint8_t> saved0, saved1;
  ASSERT_TRUE(states[0].save(&saved0).is_ok());
  inputs[0][2345] = NAN;
  const std::vector<Status> results = step(job, codec, states, inputs, &outputs, 2);
  EXPECT_EQ(results[0].code(), TIDEGATE_ERR_INVALID_ARGUMENT) << results[0].to_string();
  EXPECT_NE(results[0].message().find("element 2345"), std::string::npos) << results[0].message();
  EXPECT_FALSE(results[1].is_ok());  // its peer aborted
  ASSERT_TRUE(states[0].save(&saved1).is_ok());
  // The step counter moved (the op was posted), but no residual changed.
  expect_same_residuals(saved0, saved1, count);
}

}  // namespace
}  // namespace tidegate::testing
