// Runs collectives on N ranks as threads of this process, each driving its own transport the
// way the communicator's progress thread does: start the task, then advance it whenever the
// transport made progress. The transport is the in-process loopback
// (tests/support/loopback_transport.h) or a real one that runs in threads (tcp, ucx; see
// transport_worlds.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "collectives/collective_args.h"
#include "collectives/task.h"
#include "loopback_transport.h"

namespace tidegate::testing {

inline constexpr const char* kLoopback = "loopback";

struct RunOptions {
  // A rank that has not finished by then fails with TIMEOUT (a hang becomes a failure).
  Milliseconds timeout{60000};
  // Like the engine: a failing rank aborts its transport, so its peers fail too instead of
  // waiting for messages that never come.
  bool abort_on_error = true;
  // "loopback", or the name of a real transport that runs in threads ("tcp", "ucx").
  std::string transport = kLoopback;
  LoopbackOptions loopback;  // for the loopback transport
};

// Runs body(context) on `size` threads; context.rank is the thread's rank and
// context.transport its transport. Returns every rank's status (with a real transport that
// cannot connect here, its UNSUPPORTED or connection error on every rank).
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
