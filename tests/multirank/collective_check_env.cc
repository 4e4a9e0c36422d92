// One rank of a multi-process check, created from the environment (tidegate-run sets it).
#include <cstdio>

#include "collective_checks.h"

int main(int argc, char** argv) {
  tidegate_comm_t comm = nullptr;
  if (tidegate_comm_create_from_env(&comm) != TIDEGATE_OK) {
    std::fprintf(stderr, "communicator creation failed: %s\n", tidegate_last_error());
    return 1;
  }
  const int rc = tidegate::testing::run_from_args(comm, argc, argv);
  tidegate_comm_destroy(comm);
  return rc;
}
