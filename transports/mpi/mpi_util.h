// Small helpers shared by the MPI transport's files: MPI error codes as Status, tag limits.
#pragma once

#include <mpi.h>

#include <string>

#include "base/status.h"

namespace tidegate::mpi {

// MPI_SUCCESS -> OK; anything else -> SYSTEM "<what> failed: <MPI's error text>". Only valid
// on a communicator whose error handler is MPI_ERRORS_RETURN.
inline Status check_mpi(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status(TIDEGATE_ERR_SYSTEM,
                what + " failed: " + std::string(text, static_cast<size_t>(length)));
}

// MPI_TAG_UB of `comm` (at least 32767 by the standard; 2^23-1 under Open MPI's UCX PML).
inline int tag_upper_bound(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &found);
  return found && value != nullptr ? *static_cast<int*>(value) : 32767;
}

}  // namespace tidegate::mpi
