// Test program support: the checks one rank of a multi-process job runs (collective_check
// under tidegate-run, collective_check_mpi under mpirun). Each returns a process exit code.
#pragma once

#include <string>

#include "tidegate/tidegate.h"

namespace tidegate::testing {

// Collectives over every dtype/op/size of the foundation issue, values checked against a
// reference, and bitwise identity across ranks checked by gathering output hashes.
int run_value_checks(tidegate_comm_t comm);

// Scenario "mismatch": rank 1 posts a different count; every rank must report MISMATCH naming
// the ranks, the op and the field. Scenario "timeout": the last rank never posts; the others
// must report TIMEOUT within the deadline and the silent rank must then see the failure.
int run_scenario(tidegate_comm_t comm, const std::string& scenario);

// Parses "--scenario NAME" (empty = value checks) and runs it.
int run_from_args(tidegate_comm_t comm, int argc, char** argv);

}  // namespace tidegate::testing
