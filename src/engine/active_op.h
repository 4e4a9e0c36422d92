// One collective in the engine's window of ops in flight (progress_engine.h): its request, the
// transport and algorithm chosen for it, the phases that run it and its own deadline.
//
// An op runs as one, two or three phases. Its own task is the main phase. An op planned off the
// first transport, or onto a native collective, first runs an identity check on the first transport
// (a header-only dissemination round carrying its header, collectives/barrier/dissemination.cc)
// so that ranks whose arguments differ meet and report a MISMATCH instead of waiting on
// different transports. An op that repeats the native allreduce before it may first run that
// collective with the check folded in (engine/native_prediction.h); when every rank's op was
// the predicted one, that phase does the op and the others are skipped. Each phase runs on a lane:
// a (transport, channel) pair, or a transport's native collectives; the engine starts a phase only
// when no earlier op still has a phase on that lane, so every lane carries the ops' messages in
// posting order on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/transport.h"
#include "base/types.h"
#include "collectives/task.h"
#include "engine/request.h"
#include "select/planner.h"

namespace tidegate {

// Where a phase's messages travel. Two phases on the same lane must not overlap.
struct Lane {
  static constexpr uint32_t kNativeChannel = UINT32_MAX;  // the transport's own collectives
  Transport* transport = nullptr;
  uint32_t channel = 0;

  bool operator==(const Lane& other) const {
    return transport == other.transport && channel == other.channel;
  }
};

struct OpPhase {
  TaskContext context;  // transport and channel of this phase
  Lane lane;
  std::unique_ptr<CollectiveTask> task;  // null once the phase finished
  bool started = false;
  // Starts only once every earlier op in the window that the predictor recorded as native
  // finished (a predicted native collective, whose shape rests on those ops having agreed:
  // engine/native_prediction.h).
  bool after_earlier_native_ops = false;
};

struct ActiveOp {
  std::shared_ptr<Request> request;
  CollectiveArgs args;    // as the tasks see them (a re-planning round gets engine buffers)
  PlanDecision decision;  // planner's choice (transport_index, algorithm); unset without one
  // In order: [predicted native collective,] [identity check,] the op's own task.
  std::vector<OpPhase> phases;
  size_t current = 0;     // index of the phase running or waiting to start
  bool finished = false;  // every phase is done; the request completes in posting order
  bool ran_alone = true;  // no other op was in flight meanwhile: its time is evidence
  Clock::time_point started;
  Clock::time_point last_progress;
  std::string choice;       // the phase that does the op's work, as Request::choice() reports it
  uint64_t bytes_sent = 0;  // payload bytes of every phase (TaskContext::bytes_sent)
  std::vector<double> replan_buffer;  // a re-planning round's statistics, reduced in place
  bool recorded_native = false;       // the native predictor recorded it as a native allreduce

  OpPhase* phase() { return finished ? nullptr : &phases[current]; }
  // Whether this op still has a phase (running or to come) on `lane`.
  bool holds(const Lane& lane) const {
    if (finished) return false;
    for (size_t i = current; i < phases.size(); ++i) {
      if (phases[i].lane == lane) return true;
    }
    return false;
  }
};

}  // namespace tidegate
