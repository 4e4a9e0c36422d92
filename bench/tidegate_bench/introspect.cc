#include "bench/tidegate_bench/introspect.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "api/c_api_internal.h"
#include "collectives/algorithm_table.h"
#include "collectives/collective_args.h"

namespace tidegate::bench {

namespace {

OpKind op_kind(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return OpKind::kAllreduce;
    case Collective::kReduceScatter:
      return OpKind::kReduceScatter;
    case Collective::kAllgather:
      return OpKind::kAllgather;
    case Collective::kAllgatherv:
      return OpKind::kAllgatherv;
    case Collective::kBroadcast:
      return OpKind::kBroadcast;
    case Collective::kAlltoallv:
      return OpKind::kAlltoallv;
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

CollectiveArgs case_args(BenchCase& c) {
  CollectiveArgs args;
  args.kind = op_kind(c.collective());
  args.input = tensor(c.input(), c.input_count(), c.dtype());
  args.output = tensor(c.output(), c.output_count(), c.dtype());
  args.reduce_op = c.op();
  args.root = c.root();
  args.counts = c.rank_counts();
  args.send_counts = args.recv_counts = c.rank_counts();
  args.send_offsets = args.recv_offsets = c.rank_offsets();
  return args;
}

}  // namespace

std::string transport_name(tidegate_comm_t comm) { return comm->impl->transport_names(); }

std::string planned_algorithm(tidegate_comm_t comm, BenchCase& c) {
  return comm->impl->planned_choice_for(case_args(c));
}

std::string creation_summary(tidegate_comm_t comm) {
  const ProbeProfile& p = comm->impl->probe_profile();
  char line[256];
  std::snprintf(line, sizeof line, "probe %.0f ms (%s)", p.probe_ms, p.source.c_str());
  std::string text = line;
  for (const TransportFigures& f : p.transports) {
    std::snprintf(line, sizeof line, "; %s alpha %.1f us, %.3f GB/s", f.transport.c_str(),
                  f.alpha_us, f.bandwidth_GBps);
    text += line;
  }
  return text;
}

std::vector<std::string> forced_choices(tidegate_comm_t comm, BenchCase& c,
                                        const std::vector<std::string>& only) {
  CollectiveArgs args = case_args(c);
  std::vector<std::string> choices;
  std::string names = comm->impl->transport_names() + ",";
  for (size_t start = 0, comma; (comma = names.find(',', start)) != std::string::npos;
       start = comma + 1) {
    const std::string transport = names.substr(start, comma - start);
    std::vector<std::string> algorithms;
    for (const char* a : algorithm_names(args.kind)) algorithms.emplace_back(a);
    if (std::find(algorithms.begin(), algorithms.end(), "native") == algorithms.end()) {
      algorithms.emplace_back("native");
    }
    for (const std::string& algorithm : algorithms) {
      const std::string name = transport + "/" + algorithm;
      if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
      args.force_transport = transport;
      args.force_algorithm = algorithm;
      // Only choices this build can run for the case (e.g. native only where the transport
      // takes this dtype and op).
      if (comm->impl->planned_choice_for(args) == transport + "/" + algorithm) {
        choices.push_back(transport + "/" + algorithm);
      }
    }
  }
  return choices;
}

tidegate_status_t run_choice(tidegate_comm_t comm, BenchCase& c, const std::string& choice) {
  CollectiveArgs args = case_args(c);
  const size_t slash = choice.find('/');
  args.force_transport = choice.substr(0, slash);
  args.force_algorithm = choice.substr(slash + 1);
  // Posted and waited for as a blocking collective is, so forced and auto rows pay the same.
  std::shared_ptr<Request> request;
  Status st = comm->impl->post(std::move(args), &request, /*caller_waits=*/true);
  if (st.is_ok()) st = comm->impl->wait(request);
  return st.code();
}

}  // namespace tidegate::bench
