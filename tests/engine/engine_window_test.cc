// The progress engine's window of ops in flight (engine/progress_engine.h), on N ranks as
// threads over the loopback transport: several ops really run at once (an op that can only
// finish when a later one has started completes with a window and times out without one),
// requests complete in posting order whatever order the ops finish in, results stay
// bitwise identical, one op's failure fails the rest on every rank, an abort ends every op in
// flight, and each op has its own deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine_world.h"

namespace tidegate::testing {
namespace {

// Holds back this rank's sends on channel 0 until a send on channel 1 was posted. An engine
// that runs one op at a time never posts op #1 (channel 1) before op #0 (channel 0) finished,
// so op #0 stalls; a window of two or more lets op #1 start and release it.
class GatedTransport : public Transport {
 public:
  explicit GatedTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}

  const char* name() const override { return inner_->name(); }
  TransportCapabilities capabilities() const override { return inner_->capabilities(); }
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (channel == 1) opened_ = true;
    if (channel == 0 && !opened_) {
      held_.push_back({peer, channel, header, payload, bytes, next_held_});
      *handle = next_held_++;
      return Status::ok();
    }
    TG_RETURN_IF_ERROR(inner_->isend(peer, channel, header, payload, bytes, handle));
    return release_held();
  }
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override {
    return inner_->irecv(peer, channel, expected, payload, bytes, handle);
  }
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto mapped = released_.find(handle);
    if (mapped != released_.end()) handle = mapped->second;
    for (const Held& held : held_) {
      if (held.handle == handle) {
        *done = false;
        return Status::ok();
      }
    }
    return inner_->test(handle, done, payload_bytes);
  }
  Status progress(Milliseconds max_wait, bool* activity) override {
    return inner_->progress(max_wait, activity);
  }
  void wake() override { inner_->wake(); }
  void abort(const Status& reason) override { inner_->abort(reason); }
  Status close(Deadline deadline) override { return inner_->close(deadline); }

 private:
  struct Held {
    int peer;
    uint32_t channel;
    WireHeader header;
    const void* payload;
    size_t bytes;
    Handle handle;
  };
  Status release_held() {
    for (Held& held : held_) {
      Handle real = 0;
      TG_RETURN_IF_ERROR(
          inner_->isend(held.peer, held.channel, held.header, held.payload, held.bytes, &real));
      released_[held.handle] = real;
    }
    held_.clear();
    return Status::ok();
  }

  std::unique_ptr<Transport> inner_;
  std::mutex mutex_;
  bool opened_ = false;
  std::vector<Held> held_;
  std::map<Handle, Handle> released_;
  Handle next_held_ = Handle{1} << 62;  // far from the inner transport's handles
};

TEST(EngineWindow, AnOpThatNeedsALaterOneFinishesOnlyWithAWindow) {
  for (int window : {1, 4}) {
    SCOPED_TRACE("window " + std::to_string(window));
    EngineWorld world(2, config_with(window, 1500), [](std::unique_ptr<Transport> inner) {
      return std::make_unique<GatedTransport>(std::move(inner));
    });
    std::vector<std::vector<float>> op0(2, std::vector<float>(64, 1.0f));
    std::vector<std::vector<float>> op1(2, std::vector<float>(64, 2.0f));
    std::vector<Status> first(2), second(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto a = std::make_shared<Request>(allreduce_args(0, op0[r], 64));
        auto b = std::make_shared<Request>(allreduce_args(1, op1[r], 64));
        ASSERT_TRUE(world.engine(r).post(a).is_ok());
        ASSERT_TRUE(world.engine(r).post(b).is_ok());
        first[r] = a->wait(Deadline::after_ms(10000));
        second[r] = b->wait(Deadline::after_ms(10000));
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      if (window == 1) {
        // Op #0 waits for a send that only op #1 would release: a named timeout, no hang.
        EXPECT_EQ(first[r].code(), TIDEGATE_ERR_TIMEOUT) << first[r].to_string();
        EXPECT_FALSE(second[r].is_ok());
      } else {
        EXPECT_TRUE(first[r].is_ok()) << first[r].to_string();
        EXPECT_TRUE(second[r].is_ok()) << second[r].to_string();
        EXPECT_EQ(op0[r][63], 2.0f);
        EXPECT_EQ(op1[r][63], 4.0f);
      }
    }
  }
}

TEST(EngineWindow, RequestsCompleteInPostingOrderWithIdenticalResults) {
  constexpr int kRanks = 3;
  constexpr int kOps = 24;
  EngineWorld world(kRanks, config_with(4));
  // Sizes that make later ops finish before earlier ones: large, then small, repeating.
  auto count_of = [](int op) -> int64_t { return op % 3 == 0 ? (int64_t{1} << 18) + op : 7 + op; };
  std::vector<std::vector<std::vector<float>>> data(kRanks);
  std::vector<std::vector<int>> order(kRanks);
  std::mutex order_mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    for (int op = 0; op < kOps; ++op) {
      std::vector<float> values(static_cast<size_t>(count_of(op)));
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<float>((r + 1) * 0.1 + i % 13);
      data[r].push_back(std::move(values));
    }
    threads.emplace_back([&, r] {
      std::vector<std::shared_ptr<Request>> requests;
      for (int op = 0; op < kOps; ++op) {
        auto request = std::make_shared<Request>(allreduce_args(op, data[r][op], count_of(op)));
        request->on_complete([&, r, op](const Status& status) {
          EXPECT_TRUE(status.is_ok()) << status.to_string();
          std::lock_guard<std::mutex> lock(order_mutex);
          order[r].push_back(op);
        });
        ASSERT_TRUE(world.engine(r).post(request).is_ok());
        requests.push_back(request);
      }
      for (auto& request : requests) {
        ASSERT_TRUE(request->wait(Deadline::after_ms(60000)).is_ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(order[r].size(), static_cast<size_t>(kOps));
    for (int op = 0; op < kOps; ++op) EXPECT_EQ(order[r][op], op) << "rank " << r;
    for (int op = 0; op < kOps; ++op) {
      ASSERT_EQ(
          std::memcmp(data[r][op].data(), data[0][op].data(), data[0][op].size() * sizeof(float)),
          0)
          << "rank " << r << " op " << op << " differs from rank 0";
    }
  }
  // The sum itself: element i of every op is sum over ranks of (r+1)*0.1 + i%13.
  for (int op = 0; op < kOps; ++op) {
    const float expected = static_cast<float>(0.1 + 0.2 + 0.3) + 3.0f * static_cast<float>(5 % 13);
    EXPECT_NEAR(data[0][op][5], expected, 1e-4) << "op " << op;
  }
}

TEST(EngineWindow, OneOpsFailureFailsTheRestOnEveryRankInOrder) {
  constexpr int kRanks = 3;
  EngineWorld world(kRanks, config_with(4));
  std::vector<std::vector<Status>> results(kRanks, std::vector<Status>(6));
  std::vector<std::vector<std::vector<float>>> data(
      kRanks, std::vector<std::vector<float>>(6, std::vector<float>(1024, 1.0f)));
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::shared_ptr<Request>> requests;
      for (int op = 0; op < 6; ++op) {
        // Op #2 has a different count on rank 1: a MISMATCH at its first message.
        const int64_t count = op == 2 && r == 1 ? 1000 : 1024;
        auto request = std::make_shared<Request>(allreduce_args(op, data[r][op], count));
        Status posted = world.engine(r).post(request);
        if (!posted.is_ok()) {
          // Refused: the communicator failed before this rank got here (a fast peer found the
          // mismatch). The refusal is this op's result, and the ops after it are refused too.
          for (int later = op; later < 6; ++later) results[r][later] = posted;
          break;
        }
        requests.push_back(request);
      }
      for (size_t op = 0; op < requests.size(); ++op) {
        results[r][op] = requests[op]->wait(Deadline::after_ms(30000));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // Ops before the mismatch may finish or be failed by it (they were in flight together), but
    // op #2 and everything after it fail with the mismatch's code, naming the field.
    for (int op = 2; op < 6; ++op) {
      EXPECT_EQ(results[r][op].code(), TIDEGATE_ERR_MISMATCH)
          << "op " << op << ": " << results[r][op].to_string();
      EXPECT_NE(results[r][op].message().find("'count'"), std::string::npos)
          << results[r][op].message();
    }
    EXPECT_NE(results[r][2].message().find("allreduce op #2"), std::string::npos)
        << results[r][2].message();
    EXPECT_EQ(world.engine(r).failure().code(), TIDEGATE_ERR_MISMATCH);
  }
}

TEST(EngineWindow, AbortEndsEveryOpInFlightOnEveryRank) {
  constexpr int kRanks = 3;
  EngineWorld world(kRanks, config_with(4));
  std::vector<std::vector<std::vector<float>>> data(
      kRanks, std::vector<std::vector<float>>(4, std::vector<float>(256, 1.0f)));
  std::vector<std::vector<Status>> results(kRanks, std::vector<Status>(4));
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::shared_ptr<Request>> requests;
      // Rank 2 posts nothing, so the others' ops stay in flight until rank 0 aborts.
      if (r != 2) {
        for (int op = 0; op < 4; ++op) {
          auto request = std::make_shared<Request>(allreduce_args(op, data[r][op], 256));
          ASSERT_TRUE(world.engine(r).post(request).is_ok());
          requests.push_back(request);
        }
      }
      if (r == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        world.engine(0).abort(aborted_error("rank 0 gave up"));
      }
      for (size_t op = 0; op < requests.size(); ++op) {
        results[r][op] = requests[op]->wait(Deadline::after_ms(10000));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    for (int op = 0; op < 4; ++op) {
      EXPECT_EQ(results[r][op].code(), TIDEGATE_ERR_ABORTED)
          << "rank " << r << " op " << op << ": " << results[r][op].to_string();
      EXPECT_NE(results[r][op].message().find("rank 0 gave up"), std::string::npos)
          << results[r][op].message();
    }
  }
  // Rank 2, idle, learns of the abort too (its engine watches the transport while idle).
  const Deadline deadline = Deadline::after_ms(5000);
  while (world.engine(2).failure().is_ok() && !deadline.passed()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(world.engine(2).failure().code(), TIDEGATE_ERR_ABORTED);
  EXPECT_NE(world.engine(2).failure().message().find("rank 0 gave up"), std::string::npos)
      << world.engine(2).failure().message();
}

TEST(EngineWindow, EachOpHasItsOwnDeadline) {
  constexpr int kRanks = 2;
  constexpr int64_t kTimeoutMs = 800;
  EngineWorld world(kRanks, config_with(4, kTimeoutMs));
  std::vector<std::vector<float>> first(kRanks, std::vector<float>(64, 1.0f));
  std::vector<std::vector<float>> second(kRanks, std::vector<float>(64, 1.0f));
  std::vector<Status> ok(kRanks), late(kRanks);
  std::vector<double> seconds(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto a = std::make_shared<Request>(allreduce_args(0, first[r], 64));
      ASSERT_TRUE(world.engine(r).post(a).is_ok());
      ok[r] = a->wait(Deadline::after_ms(10000));
      if (r == 0) {  // rank 1 never posts op #1
        const auto start = Clock::now();
        auto b = std::make_shared<Request>(allreduce_args(1, second[r], 64));
        ASSERT_TRUE(world.engine(r).post(b).is_ok());
        late[r] = b->wait(Deadline::after_ms(10000));
        seconds[r] = std::chrono::duration<double>(Clock::now() - start).count();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(ok[0].is_ok()) << ok[0].to_string();
  EXPECT_TRUE(ok[1].is_ok()) << ok[1].to_string();
  EXPECT_EQ(late[0].code(), TIDEGATE_ERR_TIMEOUT) << late[0].to_string();
  EXPECT_NE(late[0].message().find("allreduce op #1"), std::string::npos) << late[0].message();
  EXPECT_GE(seconds[0], kTimeoutMs / 1000.0 * 0.9);
  EXPECT_LT(seconds[0], kTimeoutMs / 1000.0 + 3.0);
}

}  // namespace
}  // namespace tidegate::testing
