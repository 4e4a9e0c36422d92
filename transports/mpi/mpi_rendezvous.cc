// MPI's part of tidegate_comm_create_from_mpi (see mpi_rendezvous.h).
#include "transports/mpi/mpi_rendezvous.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>

namespace tidegate {

namespace {

Status communicator_of(const void* mpi_comm, MPI_Comm* comm) {
  TG_CHECK_ARG(mpi_comm != nullptr, "mpi_comm must point to an MPI_Comm");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return invalid_argument("MPI is not initialised: call MPI_Init first");
  *comm = *static_cast<const MPI_Comm*>(mpi_comm);
  return Status::ok();
}
}  // namespace

Status mpi_rendezvous_ranks(const void* mpi_comm, const std::string& identity, int* rank, int* size,
                            std::vector<std::string>* identities) {
  MPI_Comm comm = MPI_COMM_NULL;
  TG_RETURN_IF_ERROR(communicator_of(mpi_comm, &comm));
  MPI_Comm_rank(comm, rank);
  MPI_Comm_size(comm, size);
  constexpr size_t kSlot = kMaxRendezvousIdentityBytes + 1;
  char mine[kSlot] = {};
  std::memcpy(mine, identity.data(), std::min(identity.size(), kMaxRendezvousIdentityBytes));
  std::string all(static_cast<size_t>(*size) * kSlot, '\0');
  const int rc = MPI_Allgather(mine, static_cast<int>(kSlot), MPI_CHAR, all.data(),
                               static_cast<int>(kSlot), MPI_CHAR, comm);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Allgather of host identities failed");
  identities->clear();
  for (int r = 0; r < *size; ++r) {
    const char* entry = all.data() + static_cast<size_t>(r) * kSlot;
    identities->emplace_back(entry, strnlen(entry, kSlot));
  }
  return Status::ok();
}

Status mpi_rendezvous_broadcast(const void* mpi_comm, size_t max_bytes, std::string* text) {
  MPI_Comm comm = MPI_COMM_NULL;
  TG_RETURN_IF_ERROR(communicator_of(mpi_comm, &comm));
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string buffer(max_bytes, '\0');
  if (rank == 0) {
    TG_CHECK_ARG(text->size() < max_bytes, "rendezvous message longer than its buffer");
    std::memcpy(buffer.data(), text->data(), text->size());
  }
  const int rc = MPI_Bcast(buffer.data(), static_cast<int>(max_bytes), MPI_CHAR, 0, comm);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Bcast of the rendezvous address failed");
  buffer.resize(strnlen(buffer.data(), max_bytes));
  *text = std::move(buffer);
  return Status::ok();
}

}  // namespace tidegate
