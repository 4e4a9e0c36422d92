// One rank of a multi-process check under mpirun: the communicator is built over MPI_COMM_WORLD.
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "collective_checks.h"
#include "creation_outcome.h"

int main(int argc, char** argv) {
  // The mpi transport drives MPI from tidegate's progress thread while this thread may call MPI,
  // so MPI_THREAD_MULTIPLE; "--thread-level single" asks for less, to test the clear refusal.
  bool single = false;
  for (int i = 1; i + 1 < argc; ++i)
    single |=
        std::strcmp(argv[i], "--thread-level") == 0 && std::strcmp(argv[i + 1], "single") == 0;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm world = MPI_COMM_WORLD;
  tidegate_comm_t comm = nullptr;
  int rc = 1;
  if (const tidegate_status_t created = tidegate_comm_create_from_mpi(&world, &comm);
      created != TIDEGATE_OK) {
    rc = tidegate::testing::creation_failure_exit_code(created, argc, argv);
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
