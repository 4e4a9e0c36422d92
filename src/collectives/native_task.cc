#include "collectives/native_task.h"

#include <string>
#include <utility>

#include "collectives/task_kit.h"

namespace tidegate {

namespace {

class NativeTask : public CollectiveTask {
 public:
  NativeTask(const TaskContext& context, const WireHeader& header,
             const NativeCollectiveArgs& native, std::function<void()> after)
      : context_(context), header_(header), native_(native), after_(std::move(after)) {}

  Status start() override { return context_.transport->post_native(header_, native_, &handle_); }

  Status advance(bool* done) override {
    *done = false;
    bool finished = false;
    TG_RETURN_IF_ERROR(context_.transport->test(handle_, &finished));
    if (!finished) return Status::ok();
    if (after_) after_();
    *done = true;
    return Status::ok();
  }

  const char* algorithm() const override { return "native"; }

 private:
  TaskContext context_;
  WireHeader header_;
  NativeCollectiveArgs native_;
  std::function<void()> after_;
  Transport::Handle handle_ = 0;
};

}  // namespace

Status check_native_supported(const TaskContext& context, NativeCollective kind,
                              const CollectiveArgs& args) {
  const tidegate_memory_t memory =
      args.input.memory == TIDEGATE_MEMORY_CUDA || args.output.memory == TIDEGATE_MEMORY_CUDA
          ? TIDEGATE_MEMORY_CUDA
          : TIDEGATE_MEMORY_HOST;
  if (context.transport->supports_native(kind, args.input.dtype, args.reduce_op, memory)) {
    return Status::ok();
  }
  const bool reduces = args.kind != OpKind::kAllgather;
  return unsupported(std::string(op_kind_name(args.kind)) + "=native: the " +
                     context.transport->name() + " transport offers no native " +
                     op_kind_name(args.kind) + " for dtype " + dtype_name(args.input.dtype) +
                     (reduces ? std::string(", op ") + reduce_op_name(args.reduce_op) : "") +
                     (memory == TIDEGATE_MEMORY_HOST ? " on host memory" : " on CUDA memory") +
                     " (rank " + std::to_string(context.rank) +
                     "); choose one of tidegate's own algorithms in TIDEGATE_ALGO, e.g. ring");
}

NativeCollectiveArgs native_args(NativeCollective kind, const CollectiveArgs& args, int64_t count) {
  NativeCollectiveArgs native;
  native.kind = kind;
  native.input = args.input.data;
  native.output = args.output.data;
  native.count = count;
  native.dtype = args.input.dtype;
  native.reduce_op = args.reduce_op;
  native.memory = args.input.memory;
  native.stream = args.input.stream;
  native.identity_checked = args.identity_checked;
  return native;
}

std::unique_ptr<CollectiveTask> make_native_task(const TaskContext& context,
                                                 const CollectiveArgs& args,
                                                 const NativeCollectiveArgs& native,
                                                 std::function<void()> after) {
  WireHeader header = op_identity(context, args);
  header.sender_rank = static_cast<uint32_t>(context.rank);
  return std::make_unique<NativeTask>(context, header, native, std::move(after));
}

}  // namespace tidegate
