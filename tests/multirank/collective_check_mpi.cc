// One rank of a multi-process check under mpirun: the communicator is built over MPI_COMM_WORLD.
#include <mpi.h>

#include <cstdio>

#include "collective_checks.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm world = MPI_COMM_WORLD;
  tidegate_comm_t comm = nullptr;
  int rc = 1;
  if (tidegate_comm_create_from_mpi(&world, &comm) != TIDEGATE_OK) {
    std::fprintf(stderr, "communicator creation failed: %s\n", tidegate_last_error());
  } else {
    rc = tidegate::testing::run_from_args(comm, argc, argv);
    tidegate_comm_destroy(comm);
  }
  // Agree on the outcome so mpirun's exit code reflects any rank's failure.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
