// The transport conformance suite's view of a job: a world of ranks, each with one transport
// created through the transport registry, and the rank a contract body runs as. The bodies
// (the *_test.cc files) are written once against these interfaces; two executables link them to
// different worlds:
//   - thread_world.cc: every rank is a thread of this process (tcp, ucx, nccl);
//   - process_world.cc: every rank is a process under mpirun (mpi, ucx, tcp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/transport.h"

namespace tidegate::conformance {

// Every wait of a body ends by then: a transport that hangs fails the case instead.
inline constexpr int64_t kWaitMs = 20000;

// One rank as a body sees it.
class Rank {
 public:
  virtual ~Rank() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The communicator id the transport was created with; headers must carry it.
  virtual uint64_t comm_id() const = 0;
  virtual Transport& transport() = 0;
  // Returns once every rank of the world has called it (or fails the case at kWaitMs). Only
  // for ordering the bodies' steps: it does not drive the transport.
  virtual void barrier() = 0;

  int next() const { return (rank() + 1) % size(); }
  int prev() const { return (rank() + size() - 1) % size(); }
};

using RankBody = std::function<void(Rank& rank)>;

// A world of ranks whose transports connected.
class World {
 public:
  virtual ~World() = default;
  // Runs `body` once on every rank of this world that lives in this process and returns when
  // all of them finished. gtest assertions inside the body count for the running test.
  // Each rank's transport is destroyed as soon as its own body returns, as a communicator
  // destroys its transports right after close() and a process ends: a closed transport that
  // lingered without progress could keep a peer's close waiting (UCX's flush of an endpoint
  // needs the peer's acknowledgement), which no real rank does.
  virtual void run(const RankBody& body) = 0;
};

// Creates a world of `ranks` ranks over `transport`. Returns nullptr and sets *skip_reason
// when this machine cannot run that world (no GPU, UCX unusable here, ...); a transport that
// should connect and does not is a test failure (reported inside).
std::unique_ptr<World> make_world(const std::string& transport, int ranks,
                                  std::string* skip_reason);

// What this executable runs: the transports it can host and the world sizes.
std::vector<std::string> world_transports();
std::vector<int> world_sizes();

}  // namespace tidegate::conformance
