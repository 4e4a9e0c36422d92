// One rank of a multi-process check, created from the environment (tidegate-run sets it).
#include <cstdio>

#include "collective_checks.h"
#include "creation_outcome.h"

int main(int argc, char** argv) {
  tidegate_comm_t comm = nullptr;
  if (const tidegate_status_t created = tidegate_comm_create_from_env(&comm);
      created != TIDEGATE_OK) {
    return tidegate::testing::creation_failure_exit_code(created, argc, argv);
  }
  const int rc = tidegate::testing::run_from_args(comm, argc, argv);
  tidegate_comm_destroy(comm);
  return rc;
}
