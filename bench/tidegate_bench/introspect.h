// What tidegate-bench asks the library beyond the public API: which transport a communicator
// uses and which algorithm its plan picks for a case, so that every row names what ran.
// The only file of the tool that reaches into the library's internals.
#pragma once

#include <string>

#include "bench/tidegate_bench/bench_case.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

std::string transport_name(tidegate_comm_t comm);
// The algorithm the communicator's plan runs for this case (TIDEGATE_ALGO or the size rule).
std::string planned_algorithm(tidegate_comm_t comm, BenchCase& c);

}  // namespace tidegate::bench
