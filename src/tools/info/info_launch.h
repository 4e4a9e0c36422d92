// How tidegate-info joins a job to show the probe and the plan: under tidegate-run through the
// environment, under mpirun through MPI (info_mpi.cc when built with MPI, info_no_mpi.cc
// otherwise). Only those two files know about MPI.
#pragma once

#include "base/config.h"
#include "tidegate/tidegate.h"

namespace tidegate::info {

// True when this process was started by mpirun and this build can bootstrap through MPI.
bool launched_by_mpi(const Config& config);

// MPI_Init_thread(MULTIPLE) + tidegate_comm_create_from_mpi(MPI_COMM_WORLD).
tidegate_status_t create_mpi_comm(tidegate_comm_t* comm);

// MPI_Finalize when create_mpi_comm initialised MPI.
void finish_mpi();

}  // namespace tidegate::info
