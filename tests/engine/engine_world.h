// N ranks' progress engines as threads of one process over one loopback hub (the engine
// tests' world), and the small allreduce they post.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/progress_engine.h"
#include "harness.h"
#include "loopback_transport.h"

namespace tidegate::testing {

struct Rank {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<ProgressEngine> engine;
};

// Engines of `size` ranks over one loopback hub (rank 0's transport optionally gated).
class EngineWorld {
 public:
  // `wrap_rank0`, when given, wraps rank 0's transport (a test's fault or gate).
  using Wrap = std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)>;
  EngineWorld(int size, const Config& config, const Wrap& wrap_rank0 = nullptr)
      : hub_(size, LoopbackOptions{}), config_(config), ranks_(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r) {
      std::unique_ptr<Transport> transport = hub_.connect(r);
      if (wrap_rank0 && r == 0) transport = wrap_rank0(std::move(transport));
      TaskContext context;
      context.transport = transport.get();
      context.rank = r;
      context.size = size;
      context.comm_id = 99;
      context.config = &config_;
      ranks_[static_cast<size_t>(r)].transport = std::move(transport);
      ranks_[static_cast<size_t>(r)].engine = std::make_unique<ProgressEngine>(context);
    }
  }
  ~EngineWorld() {
    for (Rank& rank : ranks_) rank.engine.reset();  // before the transports they drive
  }
  int size() const { return static_cast<int>(ranks_.size()); }
  ProgressEngine& engine(int rank) { return *ranks_[static_cast<size_t>(rank)].engine; }

 private:
  LoopbackHub hub_;
  Config config_;
  std::vector<Rank> ranks_;
};

inline CollectiveArgs allreduce_args(uint64_t op_seq, std::vector<float>& data, int64_t count) {
  CollectiveArgs args;
  args.kind = OpKind::kAllreduce;
  args.op_seq = op_seq;
  args.reduce_op = TIDEGATE_SUM;
  TensorView view;
  view.data = data.data();
  view.count = count;
  view.dtype = TIDEGATE_FLOAT32;
  args.input = args.output = view;
  return args;
}

inline Config config_with(int window, int64_t timeout_ms = 20000) {
  return make_config({{"TIDEGATE_OPS_IN_FLIGHT", std::to_string(window)},
                      {"TIDEGATE_TIMEOUT_MS", std::to_string(timeout_ms)}});
}

}  // namespace tidegate::testing
