// One rank of the fault tests under tidegate-run: the communicator comes from the environment.
#include <cstdlib>

#include "fault_checks.h"

int main(int argc, char** argv) {
  tidegate::faults::Launcher launcher;
  const char* rank = std::getenv("TIDEGATE_RANK");
  const char* size = std::getenv("TIDEGATE_SIZE");
  launcher.rank = rank != nullptr ? std::atoi(rank) : 0;
  launcher.size = size != nullptr ? std::atoi(size) : 1;
  launcher.create = [](tidegate_comm_t* comm) { return tidegate_comm_create_from_env(comm); };
  return tidegate::faults::run_fault_check(tidegate::faults::parse_fault_options(argc, argv),
                                           launcher);
}
