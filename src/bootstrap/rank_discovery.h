// Where a process learns its rank and the world size when it is started from the
// environment: tidegate's own variables first, then the launcher's (mpirun, srun, ...) so that
// a job launched by mpirun or srun needs no extra set-up even without the MPI transport.
#pragma once

#include <string>

#include "base/config.h"
#include "base/status.h"

namespace tidegate {

// Fills *rank, *size and *source (a short description of where they came from, e.g.
// "Open MPI (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE)") from the first of:
//   TIDEGATE_RANK + TIDEGATE_SIZE            (config.raw)
//   OMPI_COMM_WORLD_RANK + OMPI_COMM_WORLD_SIZE  (Open MPI's mpirun)
//   PMI_RANK + PMI_SIZE                      (MPICH/Hydra and other PMI launchers)
//   SLURM_PROCID + SLURM_NTASKS              (srun)
// that has either of its pair set. CONFIG error naming the variable when only half of a pair
// is set, when a value is not a decimal integer, when size < 1 or rank is outside [0, size),
// and when no pair is set at all.
Status discover_rank_and_size(const Config& config, int* rank, int* size, std::string* source);

}  // namespace tidegate
