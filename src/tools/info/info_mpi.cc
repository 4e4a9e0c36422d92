// tidegate-info's MPI start-up (built when tidegate has MPI).
#include <mpi.h>

#include "src/tools/info/info_launch.h"

namespace tidegate::info {

namespace {
bool initialised_here = false;
}

bool launched_by_mpi(const Config& config) {
  return !config.launcher_variable("OMPI_COMM_WORLD_SIZE").empty() ||
         !config.launcher_variable("PMIX_RANK").empty() ||
         !config.launcher_variable("PMI_SIZE").empty();
}

tidegate_status_t create_mpi_comm(tidegate_comm_t* comm) {
  int provided = 0;
  // MULTIPLE so that the mpi transport can join the probe; the other transports need none.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    return TIDEGATE_ERR_INTERNAL;
  }
  initialised_here = true;
  MPI_Comm world = MPI_COMM_WORLD;
  return tidegate_comm_create_from_mpi(&world, comm);
}

void finish_mpi() {
  if (initialised_here) MPI_Finalize();
}

}  // namespace tidegate::info
