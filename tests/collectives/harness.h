// Runs collectives on N ranks as threads of this process, each driving its own loopback
// transport (tests/support/loopback_transport.h) the way the communicator's progress thread
// drives a real one: start the task, then advance it whenever the transport made progress.
#pragma once

#include <functional>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "collectives/collective_args.h"
#include "collectives/task.h"
#include "loopback_transport.h"

namespace tidegate::testing {

struct RunOptions {
  // A rank that has not finished by then fails with TIMEOUT (a hang becomes a failure).
  Milliseconds timeout{60000};
  // Like the engine: a failing rank aborts its transport, so its peers fail too instead of
  // waiting for messages that never come.
  bool abort_on_error = true;
  LoopbackOptions loopback;
};

// Runs body(context) on `size` threads; context.rank is the thread's rank and
// context.transport its loopback transport. Returns every rank's status.
using RankBody = std::function<Status(const TaskContext& context)>;
std::vector<Status> run_ranks(int size, const Config& config, const RankBody& body,
                              const RunOptions& options = {});

// Builds the task for `args` (make_collective_task) and drives it to completion or until
// `deadline`. On failure it aborts the transport (as the engine does) before the task and its
// buffers go away, unless abort_on_error is false. Reports the algorithm's name when
// `algorithm` is not null.
Status run_collective(const TaskContext& context, const CollectiveArgs& args, Deadline deadline,
                      std::string* algorithm = nullptr, bool abort_on_error = true);

// A Config with the defaults plus the given overrides (each must be valid).
Config make_config(const std::vector<std::pair<std::string, std::string>>& overrides);

}  // namespace tidegate::testing
