#include "bench/tidegate_bench/introspect.h"

#include "collectives/collective_args.h"
#include "core/c_api_internal.h"

namespace tidegate::bench {

namespace {

OpKind op_kind(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return OpKind::kAllreduce;
    case Collective::kReduceScatter: return OpKind::kReduceScatter;
    case Collective::kAllgather: return OpKind::kAllgather;
    case Collective::kAllgatherv: return OpKind::kAllgatherv;
    case Collective::kBroadcast: return OpKind::kBroadcast;
    case Collective::kAlltoallv: return OpKind::kAlltoallv;
  }
  return OpKind::kAllreduce;
}

TensorView tensor(void* data, int64_t count, tidegate_dtype_t dtype) {
  TensorView v;
  v.data = data;
  v.count = count;
  v.dtype = dtype;
  return v;
}

}  // namespace

std::string transport_name(tidegate_comm_t comm) { return comm->impl->transport_name(); }

std::string planned_algorithm(tidegate_comm_t comm, BenchCase& c) {
  CollectiveArgs args;
  args.kind = op_kind(c.collective());
  args.input = tensor(c.input(), c.input_count(), c.dtype());
  args.output = tensor(c.output(), c.output_count(), c.dtype());
  args.reduce_op = c.op();
  args.root = c.root();
  args.counts = c.rank_counts();
  args.send_counts = args.recv_counts = c.rank_counts();
  args.send_offsets = args.recv_offsets = c.rank_offsets();
  return comm->impl->planned_algorithm_for(args);
}

}  // namespace tidegate::bench
