// TIDEGATE_TUNE: user overrides of the plan, modelled on UCC's TUNE strings.
//
// Grammar (whitespace not allowed; case-sensitive names):
//   tune     := rule ( '#' rule )*
//   rule     := target ( ':' field )+
//   target   := collective | 'all'            collective: allreduce, reduce_scatter, allgather,
//                                              allgatherv, broadcast, barrier, alltoallv
//   field    := range | memory | transport | '@' algorithm | codec
//   codec    := 'codec=' spec                  the rule's last field, so the spec may hold ':'
//                                              and ',' (codec=qsgd:bits=4,bucket=512; 'none'
//                                              is the dense allreduce)
//   range    := size '-' ( size | 'inf' )     size: 0, 4096, 4K, 1M, 2G (binary multiples);
//                                              both ends inclusive; default 0-inf
//   memory   := 'host' | 'cuda'                default: both
//   transport:= a transport's name (tcp, mpi, ucx, nccl)
// Each rule restricts the plan for the sizes and memory kinds it covers to the choices that
// match its transport and/or algorithm; later rules win where rules overlap. A rule with a
// codec applies to compressed allreduces with codec "auto" only (the codec plan): it makes
// them use that codec (which must be in the op's allow-list) in its size range; the dense plan
// ignores it. Examples:
//   TIDEGATE_TUNE='allreduce:0-1M:codec=none#allreduce:1M-inf:codec=qsgd:bits=4,bucket=512'
//   TIDEGATE_TUNE='allreduce:0-64K:@recursive_doubling#allreduce:64K-inf:tcp:@ring'
// A malformed string is a CONFIG error that quotes the rule and says what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

struct TuneRule {
  std::optional<OpKind> kind;  // nullopt = all collectives
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;            // inclusive
  std::optional<tidegate_memory_t> memory;  // nullopt = host and cuda
  std::string transport;                    // "" = any
  std::string algorithm;                    // "" = any
  std::string codec;                        // "" = no codec rule (see above)
  std::string text;                         // the rule as written, for messages
};

Status parse_tune(const std::string& text, std::vector<TuneRule>* rules);

}  // namespace tidegate
