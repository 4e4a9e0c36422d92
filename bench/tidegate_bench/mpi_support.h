// Everything tidegate-bench does with MPI, behind plain functions: mpi_support.cc implements
// them when tidegate is built with MPI, mpi_unavailable.cc (which reports UNSUPPORTED)
// otherwise. No other file of the tool includes <mpi.h> or tests TIDEGATE_HAVE_MPI.
#pragma once

#include <string>

#include "base/status.h"
#include "bench/tidegate_bench/bench_case.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench::mpi {

// True when this build has MPI.
bool built();

// MPI_Init / MPI_Finalize.
Status init(int* argc, char*** argv);
void finalize();

// tidegate_comm_create_from_mpi over MPI_COMM_WORLD.
Status create_comm(tidegate_comm_t* comm);

// MPI_Abort(MPI_COMM_WORLD): the way to end every rank when one fails under mpirun.
[[noreturn]] void abort_job(int code);

// Whether MPI can run the case (false for dtypes MPI lacks, such as float16/bfloat16, or
// counts beyond MPI's int); *why says why not. AVG is timed as MPI_SUM (same traffic; the
// division is local), which *why notes.
bool supports(const BenchCase& c, std::string* why);

// MPI_Barrier on MPI_COMM_WORLD.
Status barrier();

// The MPI collective matching the case, on the case's own buffers.
Status run(BenchCase& c);

}  // namespace tidegate::bench::mpi
