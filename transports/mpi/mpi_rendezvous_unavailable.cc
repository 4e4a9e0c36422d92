// Built instead of mpi_rendezvous.cc when tidegate has no MPI.
#include "transports/mpi/mpi_rendezvous.h"

namespace tidegate {

namespace {
Status no_mpi() {
  return unsupported(
      "tidegate was built without MPI: rebuild with MPI installed "
      "(-DTIDEGATE_WITH_MPI=ON) or create the communicator from the environment");
}
}  // namespace

Status mpi_rendezvous_ranks(const void*, const std::string&, int*, int*,
                            std::vector<std::string>*) {
  return no_mpi();
}
Status mpi_rendezvous_broadcast(const void*, size_t, std::string*) { return no_mpi(); }

}  // namespace tidegate
