#include "harness.h"

#include "select/size_rule.h"
#include "transport_worlds.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace tidegate::testing {

namespace {

Status drive(const TaskContext& context, const CollectiveArgs& args, Deadline deadline,
             std::unique_ptr<CollectiveTask>& task, std::string* algorithm) {
  TG_RETURN_IF_ERROR(make_collective_task(context, args, &task));
  if (algorithm != nullptr) *algorithm = task->algorithm();
  TG_RETURN_IF_ERROR(task->start());
  while (true) {
    bool done = false;
    TG_RETURN_IF_ERROR(task->advance(&done));
    if (done) return Status::ok();
    if (deadline.passed()) {
      return timeout_error("rank " + std::to_string(context.rank) + ": " + op_kind_name(args.kind) +
                           " did not finish before the test deadline");
    }
    bool activity = false;
    // A task with local work left (a pipeline's next encodings) goes on without waiting.
    const Milliseconds wait(task->has_local_work() ? 0 : 50);
    TG_RETURN_IF_ERROR(context.transport->progress(wait, &activity));
  }
}

}  // namespace

Status run_collective(const TaskContext& context, const CollectiveArgs& args, Deadline deadline,
                      std::string* algorithm, bool abort_on_error) {
  std::unique_ptr<CollectiveTask> task;
  Status status = drive(context, args, deadline, task, algorithm);
  // Abort while the task still owns its buffers: no transfer can land in them afterwards.
  if (!status.is_ok() && abort_on_error) context.transport->abort(status);
  return status;
}

std::vector<Status> run_ranks(int size, const Config& config, const RankBody& body,
                              const RunOptions& options) {
  const bool loopback = options.transport == kLoopback;
  LoopbackHub hub(size, options.loopback);
  std::vector<std::unique_ptr<Transport>> owned;
  std::vector<Transport*> transports;
  if (loopback) {
    for (int r = 0; r < size; ++r) owned.push_back(hub.connect(r));
    for (const auto& t : owned) transports.push_back(t.get());
  } else if (Status st = shared_transports(options.transport, size, &transports); !st.is_ok()) {
    return std::vector<Status>(static_cast<size_t>(size), st);
  }
  std::vector<Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      TaskContext context;
      context.transport = transports[static_cast<size_t>(r)];
      context.rank = r;
      context.size = size;
      context.comm_id = 42;
      context.config = &config;
      context.channel = 3;
      Status status = body(context);
      if (!status.is_ok() && options.abort_on_error) context.transport->abort(status);
      results[static_cast<size_t>(r)] = std::move(status);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& st : results) {
    if (st.is_ok() || loopback) continue;
    drop_shared_transports(options.transport, size);  // its streams may no longer pair
    break;
  }
  return results;
}

Config make_config(const std::vector<std::pair<std::string, std::string>>& overrides) {
  Config config;
  for (const auto& [name, value] : overrides) {
    Status status = config.set(name, value);
    EXPECT_TRUE(status.is_ok()) << status.message();
  }
  return config;
}

}  // namespace tidegate::testing
