// Native allgather: the transport's own (MPI_Iallgather, ncclAllGather). tidegate's allgather
// takes `count` elements per rank and fills size*count in rank order, which is the native
// convention, so the arguments map one to one.
//
// Aliasing: an input that is exactly this rank's block of the output is the classic in-place
// allgather, which the transport recognises. Any other overlap of input and output (the C API
// does not forbid it) would be an aliasing error for MPI, so the input is copied to a private
// buffer first.
#include <cstring>
#include <memory>

#include "collectives/algorithms.h"
#include "collectives/native_task.h"

namespace tidegate {

namespace {

bool overlaps(const char* a, size_t a_bytes, const char* b, size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

Status make_allgather_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(args.input.dtype == args.output.dtype,
               "allgather: input and output must have the same dtype");
  TG_CHECK_ARG(args.input.count >= 0, "allgather: negative input count");
  TG_CHECK_ARG(args.output.count == args.input.count * context.size,
               "allgather: output count must be size * input count");
  TG_RETURN_IF_ERROR(check_native_supported(context, NativeCollective::kAllgather, args));
  NativeCollectiveArgs native = native_args(NativeCollective::kAllgather, args, args.input.count);

  const size_t bytes = args.input.bytes();
  const char* own_slot = args.output.byte_data() + static_cast<size_t>(context.rank) * bytes;
  std::shared_ptr<char[]> copy;
  if (args.input.byte_data() != own_slot &&
      overlaps(args.input.byte_data(), bytes, args.output.byte_data(), args.output.bytes())) {
    copy = std::make_shared_for_overwrite<char[]>(bytes);
    std::memcpy(copy.get(), args.input.data, bytes);
    native.input = copy.get();
  }
  // The task owns the copy until the collective has finished with it.
  *task = make_native_task(context, args, native, [copy] {});
  return Status::ok();
}

double allgather_native_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::native_collective(t, n, cost::spread(p));
}

}  // namespace tidegate
