// What creating a communicator over an MPI communicator needs from MPI, with no MPI type in
// sight (DESIGN.md: creating the communicator belongs to the api layer; the mpi transport only
// offers the MPI calls it needs). Implemented by mpi_rendezvous.cc when tidegate has MPI and by
// mpi_rendezvous_unavailable.cc otherwise (every function then returns UNSUPPORTED).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate {

// Longest text mpi_rendezvous_ranks() gathers per rank.
inline constexpr size_t kMaxRendezvousIdentityBytes = 255;

// This rank and the size of the MPI communicator at `mpi_comm` (an MPI_Comm*), and every rank's
// `identity` (at most kMaxRendezvousIdentityBytes; longer is cut) in rank order, gathered with
// MPI_Allgather. Collective over that communicator. INVALID_ARGUMENT when MPI is not
// initialised.
Status mpi_rendezvous_ranks(const void* mpi_comm, const std::string& identity, int* rank, int* size,
                            std::vector<std::string>* identities);

// Broadcasts `text` (at most max_bytes - 1 bytes, no NUL) from rank 0 to every rank of the MPI
// communicator (MPI_Bcast); every rank passes the same max_bytes. Collective.
Status mpi_rendezvous_broadcast(const void* mpi_comm, size_t max_bytes, std::string* text);

}  // namespace tidegate
