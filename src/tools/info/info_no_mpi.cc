// tidegate-info without MPI: mpirun jobs cannot be joined (tidegate-run works).
#include "src/tools/info/info_launch.h"

namespace tidegate::info {

bool launched_by_mpi(const Config&) { return false; }
tidegate_status_t create_mpi_comm(tidegate_comm_t*) { return TIDEGATE_ERR_UNSUPPORTED; }
void finish_mpi() {}

}  // namespace tidegate::info
