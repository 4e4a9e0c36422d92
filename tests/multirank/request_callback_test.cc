// Completion callbacks through the public API (tidegate_request_on_complete and the C++
// Request::on_complete): every callback runs once, in posting order, with the collective's
// status and, inside the callback, its message; a callback on a finished request runs at once.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.hpp"

namespace tidegate::testing {
namespace {

struct Record {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<tidegate_status_t> codes;
  std::vector<std::string> messages;
};

struct Ticket {
  Record* record;
  int op;
};

void on_done(void* user_data, tidegate_status_t status) {
  auto* ticket = static_cast<Ticket*>(user_data);
  std::lock_guard<std::mutex> lock(ticket->record->mutex);
  ticket->record->order.push_back(ticket->op);
  ticket->record->codes.push_back(status);
  ticket->record->messages.push_back(tidegate_last_error());
}

TEST(RequestCallbacks, RunOnceInPostingOrderWithTheStatus) {
  ThreadWorld& world = ThreadWorld::shared(3);
  constexpr int kOps = 12;
  std::vector<Record> records(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<std::vector<float>> data;
    std::vector<Ticket> tickets(kOps);
    std::vector<tidegate_request_t> requests;
    for (int op = 0; op < kOps; ++op) {
      // Alternating sizes, so later ops can finish before earlier ones.
      data.emplace_back(op % 2 == 0 ? (1 << 18) : 3, 1.0f);
    }
    for (int op = 0; op < kOps; ++op) {
      tidegate_tensor_t t = tidegate_host_tensor(
          data[op].data(), static_cast<int64_t>(data[op].size()), TIDEGATE_FLOAT32);
      tidegate_request_t request = nullptr;
      ASSERT_EQ(tidegate_iallreduce(comm, &t, &t, TIDEGATE_SUM, &request), TIDEGATE_OK)
          << tidegate_last_error();
      tickets[op] = {&records[rank], op};
      ASSERT_EQ(tidegate_request_on_complete(request, on_done, &tickets[op]), TIDEGATE_OK);
      requests.push_back(request);
    }
    for (tidegate_request_t request : requests) {
      EXPECT_EQ(tidegate_request_wait(request, -1), TIDEGATE_OK) << tidegate_last_error();
    }
    // A callback on a request that already finished runs at once, on this thread.
    Ticket late{&records[rank], 100};
    ASSERT_EQ(tidegate_request_on_complete(requests.back(), on_done, &late), TIDEGATE_OK);
    for (tidegate_request_t request : requests) tidegate_request_free(request);
    EXPECT_EQ(data[0][5], 3.0f);
  });
  for (int rank = 0; rank < 3; ++rank) {
    Record& record = records[rank];
    ASSERT_EQ(record.order.size(), static_cast<size_t>(kOps + 1)) << "rank " << rank;
    for (int op = 0; op < kOps; ++op) EXPECT_EQ(record.order[op], op) << "rank " << rank;
    EXPECT_EQ(record.order.back(), 100);
    for (tidegate_status_t code : record.codes) EXPECT_EQ(code, TIDEGATE_OK);
    for (const std::string& message : record.messages) EXPECT_EQ(message, "");
  }
}

TEST(RequestCallbacks, CarryTheErrorAndItsMessage) {
  ThreadWorld world(2);
  std::vector<std::string> messages(2);
  std::vector<tidegate_status_t> codes(2, TIDEGATE_OK);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> data(64, 1.0f);
    tidegate_tensor_t t = tidegate_host_tensor(data.data(), rank == 0 ? 64 : 63, TIDEGATE_FLOAT32);
    tidegate_request_t handle = nullptr;
    ASSERT_EQ(tidegate_iallreduce(comm, &t, &t, TIDEGATE_SUM, &handle), TIDEGATE_OK);
    tidegate::Request request(handle);
    std::mutex mutex;
    request.on_complete([&](tidegate_status_t code, const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex);
      codes[rank] = code;
      messages[rank] = message;
    });
    EXPECT_THROW(request.wait(), tidegate::Error);
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(codes[rank], TIDEGATE_ERR_MISMATCH) << messages[rank];
    EXPECT_NE(messages[rank].find("field 'count'"), std::string::npos) << messages[rank];
  }
}

TEST(RequestCallbacks, NullArgumentsAreRefused) {
  EXPECT_EQ(tidegate_request_on_complete(nullptr, on_done, nullptr), TIDEGATE_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tidegate::testing
