#include "collectives/compressed/flush_task.h"

#include <cstring>

#include "collectives/compressed/compression_state.h"

namespace tidegate {

namespace {

class FlushResidualTask : public CollectiveTask {
 public:
  FlushResidualTask(const TaskContext& context, const CollectiveArgs& args)
      : context_(context), args_(args) {}

  const char* algorithm() const override { return "flush_residual"; }

  Status start() override {
    const TensorView& in = args_.input;
    const TensorView& out = args_.output;
    if (in.data != out.data && in.count > 0) std::memcpy(out.data, in.data, in.bytes());
    const int averaged_over = args_.reduce_op == TIDEGATE_AVG ? context_.size : 1;
    return context_.compression->flush(args_.compression.key, out, averaged_over);
  }

  Status advance(bool* done) override {
    *done = true;
    return Status::ok();
  }

 private:
  TaskContext context_;
  CollectiveArgs args_;
};

}  // namespace

Status make_flush_residual_task(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(context.compression != nullptr, "flush: no compression state");
  *task = std::make_unique<FlushResidualTask>(context, args);
  return Status::ok();
}

}  // namespace tidegate
