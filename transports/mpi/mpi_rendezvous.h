// What creating a communicator over an MPI communicator needs from MPI, with no MPI type in
// sight (DESIGN.md: creating the communicator belongs to the api layer; the mpi transport only
// offers the MPI calls it needs). Implemented by mpi_rendezvous.cc when tidegate has MPI and by
// mpi_rendezvous_unavailable.cc otherwise (every function then returns UNSUPPORTED).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate {

// This rank, the size and every rank's host name (MPI_Allgather) of the MPI communicator at
// `mpi_comm` (an MPI_Comm*). Collective over that communicator. INVALID_ARGUMENT when MPI is
// not initialised.
Status mpi_rendezvous_ranks(const void* mpi_comm, int* rank, int* size,
                            std::vector<std::string>* host_names);

// Broadcasts `text` (at most max_bytes - 1 bytes, no NUL) from rank 0 to every rank of the MPI
// communicator (MPI_Bcast); every rank passes the same max_bytes. Collective.
Status mpi_rendezvous_broadcast(const void* mpi_comm, size_t max_bytes, std::string* text);

}  // namespace tidegate
