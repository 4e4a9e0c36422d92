// The compressed allreduce through the public API and the whole stack (C API, engine, planner,
// TCP transport) on ranks as threads: every default codec gives identical results on every
// rank and fewer bytes on the wire; ranks that disagree on the codec, its settings, the key,
// error feedback or the algorithm get MISMATCH naming the field on every rank; bad options are
// refused at the call; the compression state saves, loads, resets and flushes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.hpp"

namespace tidegate::testing {
namespace {

std::vector<float> gradient(int rank, int64_t n, int step) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.001f * static_cast<float>(i * (rank + 2) + step * 7)) *
           (i % 97 == 0 ? 2.0f : 0.01f);
  }
  return x;
}

tidegate_compression_t options(const char* codec, uint64_t key = 1, int ef = 0,
                               const char* algorithm = nullptr) {
  tidegate_compression_t o{};
  o.codec = codec;
  o.key = key;
  o.error_feedback = ef;
  o.algorithm = algorithm;
  return o;
}

TEST(CompressedStack, EveryDefaultCodecIdenticalOnEveryRankWithFewerBytes) {
  ThreadWorld& world = ThreadWorld::shared(3);
  const int64_t n = 100003;
  const char* codecs[] = {"fp16",
                          "bf16",
                          "qsgd",
                          "maxmin",
                          "terngrad",
                          "signsgd",
                          "efsign",
                          "onebit",
                          "topk:ratio=0.01",
                          "randomk:ratio=0.01",
                          "threshold:value=0.05",
                          "powersgd:rank=2"};
  for (const char* codec : codecs) {
    SCOPED_TRACE(codec);
    std::vector<std::vector<float>> out(3);
    std::vector<uint64_t> sent(3, 0);
    world.run([&](int rank, tidegate_comm_t comm) {
      std::vector<float> x = gradient(rank, n, 0);
      out[rank].assign(n, 0.0f);
      tidegate_tensor_t in = tidegate_host_tensor(x.data(), n, TIDEGATE_FLOAT32);
      tidegate_tensor_t o = tidegate_host_tensor(out[rank].data(), n, TIDEGATE_FLOAT32);
      const tidegate_compression_t c = options(codec, 5, 1);
      tidegate_request_t request = nullptr;
      ASSERT_EQ(tidegate_icompressed_allreduce(comm, &in, &o, TIDEGATE_AVG, &c, &request),
                TIDEGATE_OK)
          << tidegate_last_error();
      ASSERT_EQ(tidegate_request_wait(request, -1), TIDEGATE_OK) << tidegate_last_error();
      ASSERT_EQ(tidegate_request_bytes_sent(request, &sent[rank]), TIDEGATE_OK);
      tidegate_request_free(request);
    });
    for (int r = 1; r < 3; ++r) {
      ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), n * sizeof(float)), 0) << "rank " << r;
    }
    // The dense ring sends 2 (P-1)/P of the tensor per rank; every codec but powersgd's dense
    // fallback sends less.
    const double dense = 2.0 * 2 / 3 * n * sizeof(float);
    if (std::string(codec).rfind("powersgd", 0) != 0) {
      EXPECT_LT(static_cast<double>(sent[0]), dense * 0.6) << sent[0];
    }
    EXPECT_GT(sent[0], 0u);
  }
}

struct Disagreement {
  tidegate_compression_t rank0, rank1;
  const char* field;
};

TEST(CompressedStack, DisagreementsAreMismatchesNamingTheField) {
  const Disagreement cases[] = {
      {options("fp16"), options("bf16"), "field 'codec'"},
      {options("qsgd:bits=4"), options("qsgd:bits=8"), "field 'codec config'"},
      {options("qsgd", 1), options("qsgd", 2), "field 'tensor key'"},
      {options("onebit", 1, 1), options("onebit", 1, 0), "field 'error feedback'"},
      {options("topk:ratio=0.01", 1, 0, "allgather"),
       options("topk:ratio=0.01", 1, 0, "sparse_reduce_scatter"), "field 'algorithm'"},
  };
  // A mismatch is named at once, whatever the deadline; the deadline bounds creation (three
  // ranks' probes in one process), which took over 5 s under ThreadSanitizer on a busy machine.
  setenv("TIDEGATE_TIMEOUT_MS", "20000", 1);
  for (const Disagreement& d : cases) {
    SCOPED_TRACE(d.field);
    ThreadWorld world(3);
    std::vector<tidegate_status_t> codes(3);
    std::vector<std::string> messages(3);
    world.run([&](int rank, tidegate_comm_t comm) {
      std::vector<float> x = gradient(rank, 4096, 0);
      tidegate_tensor_t t = tidegate_host_tensor(x.data(), 4096, TIDEGATE_FLOAT32);
      const tidegate_compression_t& c = rank == 1 ? d.rank1 : d.rank0;
      codes[rank] = tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c);
      messages[rank] = tidegate_last_error();
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(codes[r], TIDEGATE_ERR_MISMATCH) << "rank " << r << ": " << messages[r];
      EXPECT_NE(messages[r].find(d.field), std::string::npos)
          << "rank " << r << ": " << messages[r];
    }
  }
  unsetenv("TIDEGATE_TIMEOUT_MS");
}

TEST(CompressedStack, BadOptionsAreRefusedAtTheCallAndTheCommunicatorGoesOn) {
  ThreadWorld& world = ThreadWorld::shared(2);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> x(64, 1.0f);
    tidegate_tensor_t t = tidegate_host_tensor(x.data(), 64, TIDEGATE_FLOAT32);
    tidegate_compression_t c = options("qsgd:bits=3");  // qsgd takes 2, 4 or 8
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c), TIDEGATE_ERR_CONFIG);
    EXPECT_NE(std::string(tidegate_last_error()).find("bits"), std::string::npos);
    c = options("fp16", 1, 0, "tree");
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c), TIDEGATE_ERR_CONFIG);
    c = options("powersgd", 1, 0, "allgather");
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c),
              TIDEGATE_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(tidegate_last_error()).find("powersgd"), std::string::npos);
    c = options("fp16");
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_MAX, &c),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    std::vector<int32_t> ints(64, 1);
    tidegate_tensor_t it = tidegate_host_tensor(ints.data(), 64, TIDEGATE_INT32);
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &it, &it, TIDEGATE_SUM, &c),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    // Nothing was posted: the next collective pairs as usual.
    c = options("fp16");
    ASSERT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c), TIDEGATE_OK)
        << tidegate_last_error();
    EXPECT_EQ(x[0], 2.0f);
    // "none" is the dense allreduce.
    c = options("none");
    ASSERT_EQ(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_SUM, &c), TIDEGATE_OK);
    EXPECT_EQ(x[63], 4.0f);
    (void)rank;
  });
}

TEST(CompressedStack, StateSavesLoadsResetsAndFlushes) {
  ThreadWorld& world = ThreadWorld::shared(2);
  const int64_t n = 8192;
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> out(n);
    auto step = [&](const char* codec, uint64_t key, int t) {
      std::vector<float> x = gradient(rank, n, t);
      tidegate_tensor_t in = tidegate_host_tensor(x.data(), n, TIDEGATE_FLOAT32);
      tidegate_tensor_t o = tidegate_host_tensor(out.data(), n, TIDEGATE_FLOAT32);
      const tidegate_compression_t c = options(codec, key, 1);
      EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c), TIDEGATE_OK)
          << tidegate_last_error();
      return out;
    };
    for (int t = 0; t < 3; ++t) step("qsgd:bits=4", 9, t);
    void* saved = nullptr;
    size_t saved_bytes = 0;
    ASSERT_EQ(tidegate_ef_state_save(comm, &saved, &saved_bytes), TIDEGATE_OK)
        << tidegate_last_error();
    ASSERT_GT(saved_bytes, static_cast<size_t>(n) * sizeof(float));  // the residual is in it
    const std::vector<float> first = step("qsgd:bits=4", 9, 3);
    ASSERT_EQ(tidegate_ef_state_load(comm, saved, saved_bytes), TIDEGATE_OK);
    const std::vector<float> again = step("qsgd:bits=4", 9, 3);
    EXPECT_EQ(std::memcmp(first.data(), again.data(), n * sizeof(float)), 0)
        << "the restored state did not repeat the step";
    // A damaged buffer is refused and changes nothing.
    static_cast<uint8_t*>(saved)[0] ^= 1;
    EXPECT_EQ(tidegate_ef_state_load(comm, saved, saved_bytes), TIDEGATE_ERR_INVALID_ARGUMENT);
    tidegate_free(saved);
    ASSERT_EQ(tidegate_ef_state_reset(comm), TIDEGATE_OK);
    const std::vector<float> cold = step("qsgd:bits=4", 9, 3);
    EXPECT_NE(std::memcmp(first.data(), cold.data(), n * sizeof(float)), 0);

    // Flush: the residual of a top-k key goes into a dense tensor once, then it is zero.
    step("topk:ratio=0.01", 10, 0);
    // A tensor of another count is refused while the key holds residuals, and takes nothing.
    std::vector<float> wrong(n - 1);
    tidegate_tensor_t w = tidegate_host_tensor(wrong.data(), n - 1, TIDEGATE_FLOAT32);
    EXPECT_EQ(tidegate_ef_flush(comm, 10, &w, TIDEGATE_SUM), TIDEGATE_ERR_INVALID_ARGUMENT);
    for (float v : wrong) ASSERT_EQ(v, 0.0f);
    std::vector<float> dense(n, 0.0f);
    tidegate_tensor_t d = tidegate_host_tensor(dense.data(), n, TIDEGATE_FLOAT32);
    ASSERT_EQ(tidegate_ef_flush(comm, 10, &d, TIDEGATE_SUM), TIDEGATE_OK) << tidegate_last_error();
    double flushed = 0;
    for (float v : dense) flushed += std::fabs(v);
    EXPECT_GT(flushed, 0.0);
    std::fill(dense.begin(), dense.end(), 0.0f);
    ASSERT_EQ(tidegate_ef_flush(comm, 10, &d, TIDEGATE_SUM), TIDEGATE_OK);
    for (float v : dense) ASSERT_EQ(v, 0.0f);
  });
}

}  // namespace
}  // namespace tidegate::testing
