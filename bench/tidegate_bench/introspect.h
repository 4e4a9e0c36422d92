// What tidegate-bench asks the library beyond the public API: which transport a communicator
// uses and which algorithm its plan picks for a case, so that every row names what ran.
// The only file of the tool that reaches into the library's internals.
#pragma once

#include <string>
#include <vector>

#include "bench/tidegate_bench/bench_case.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

std::string transport_name(tidegate_comm_t comm);
// The algorithm the communicator's plan runs for this case (TIDEGATE_ALGO or the size rule).
std::string planned_algorithm(tidegate_comm_t comm, BenchCase& c);
// The probe's figures as one line: "probe 412 ms (measured); tcp alpha 31.2 us, 0.118 GB/s; ...".
std::string creation_summary(tidegate_comm_t comm);
// Every "transport/algorithm" this communicator can run the case with (for --compare-choices).
// `only`, when not empty, keeps just the choices it names.
std::vector<std::string> forced_choices(tidegate_comm_t comm, BenchCase& c,
                                        const std::vector<std::string>& only = {});
// Runs the case once (out of place) forced onto `choice`, blocking.
tidegate_status_t run_choice(tidegate_comm_t comm, BenchCase& c, const std::string& choice);

}  // namespace tidegate::bench
