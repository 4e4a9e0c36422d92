// One rank of the fault tests under mpirun: the communicator is created over MPI_COMM_WORLD.
// MPI is not finalised when the job has lost a rank (that would wait for it forever); mpirun
// ends the job when the first rank exits non-zero.
#include <mpi.h>

#include <chrono>
#include <thread>

#include "fault_checks.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  tidegate::faults::Launcher launcher;
  MPI_Comm_rank(MPI_COMM_WORLD, &launcher.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &launcher.size);
  launcher.create = [](tidegate_comm_t* comm) {
    MPI_Comm world = MPI_COMM_WORLD;
    return tidegate_comm_create_from_mpi(&world, comm);
  };
  const int code = tidegate::faults::run_fault_check(
      tidegate::faults::parse_fault_options(argc, argv), launcher);
  if (code == 0) {
    MPI_Finalize();
  } else {
    // mpirun ends the job when the first rank exits non-zero: give the others time to report.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return code;
}
