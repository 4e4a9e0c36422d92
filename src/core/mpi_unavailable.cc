// Built instead of transports/mpi/mpi_bootstrap.cc when tidegate has no MPI.
#include "core/communicator.h"

namespace tidegate {

Status create_communicator_from_mpi(const void*, std::unique_ptr<Communicator>*) {
  return unsupported("tidegate was built without MPI: rebuild with MPI installed "
                     "(-DTIDEGATE_WITH_MPI=ON) or create the communicator from the environment");
}

}  // namespace tidegate
