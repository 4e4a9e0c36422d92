// tidegate-bench's MPI side (built only with MPI): start-up, the communicator over
// MPI_COMM_WORLD and the baseline collectives.
#include "bench/tidegate_bench/mpi_support.h"

#include <mpi.h>

#include <climits>
#include <vector>

namespace tidegate::bench::mpi {

namespace {

Status check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status(TIDEGATE_ERR_SYSTEM, std::string(what) + " failed: " + std::string(text, len));
}

bool mpi_type(tidegate_dtype_t dtype, MPI_Datatype* type) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      *type = MPI_FLOAT;
      return true;
    case TIDEGATE_FLOAT64:
      *type = MPI_DOUBLE;
      return true;
    case TIDEGATE_INT32:
      *type = MPI_INT32_T;
      return true;
    case TIDEGATE_INT64:
      *type = MPI_INT64_T;
      return true;
    case TIDEGATE_UINT8:
      *type = MPI_UINT8_T;
      return true;
    default:
      return false;  // MPI 3.1 has no float16/bfloat16
  }
}

MPI_Op mpi_op(tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_PROD:
      return MPI_PROD;
    case TIDEGATE_MIN:
      return MPI_MIN;
    case TIDEGATE_MAX:
      return MPI_MAX;
    default:
      return MPI_SUM;  // SUM, and AVG timed as SUM (supports() says so)
  }
}

std::vector<int> as_int(const std::vector<int64_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

}  // namespace

bool built() { return true; }

// MPI_THREAD_MULTIPLE: with --transport mpi, tidegate's progress thread calls MPI while the
// benchmark's own thread runs the MPI baseline.
Status init(int* argc, char*** argv) {
  int provided = 0;
  return check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
}

void finalize() { MPI_Finalize(); }

Status create_comm(tidegate_comm_t* comm) {
  MPI_Comm world = MPI_COMM_WORLD;
  tidegate_status_t code = tidegate_comm_create_from_mpi(&world, comm);
  if (code != TIDEGATE_OK) {
    return Status(code, std::string("tidegate_comm_create_from_mpi: ") + tidegate_last_error());
  }
  return Status::ok();
}

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

bool supports(const BenchCase& c, std::string* why) {
  MPI_Datatype type;
  if (!mpi_type(c.dtype(), &type)) {
    *why = "MPI has no " + std::string(c.dtype() == TIDEGATE_FLOAT16 ? "float16" : "bfloat16") +
           " type";
    return false;
  }
  if (c.count() > INT_MAX) {
    *why = "count exceeds MPI's int";
    return false;
  }
  why->clear();
  if (c.op() == TIDEGATE_AVG) *why = "MPI has no avg: timed as MPI_SUM";
  return true;
}

Status barrier() { return check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

Status run(BenchCase& c) {
  MPI_Datatype type = MPI_BYTE;
  mpi_type(c.dtype(), &type);
  const int in = static_cast<int>(c.input_count());
  const int out = static_cast<int>(c.output_count());
  switch (c.collective()) {
    case Collective::kAllreduce:
      return check(MPI_Allreduce(c.input(), c.output(), in, type, mpi_op(c.op()), MPI_COMM_WORLD),
                   "MPI_Allreduce");
    case Collective::kReduceScatter:
      return check(MPI_Reduce_scatter_block(c.input(), c.output(), out, type, mpi_op(c.op()),
                                            MPI_COMM_WORLD),
                   "MPI_Reduce_scatter_block");
    case Collective::kAllgather:
      return check(MPI_Allgather(c.input(), in, type, c.output(), in, type, MPI_COMM_WORLD),
                   "MPI_Allgather");
    case Collective::kAllgatherv: {
      std::vector<int> counts = as_int(c.rank_counts()), offsets = as_int(c.rank_offsets());
      return check(MPI_Allgatherv(c.input(), in, type, c.output(), counts.data(), offsets.data(),
                                  type, MPI_COMM_WORLD),
                   "MPI_Allgatherv");
    }
    case Collective::kBroadcast:
      return check(MPI_Bcast(c.output(), out, type, c.root(), MPI_COMM_WORLD), "MPI_Bcast");
    case Collective::kAlltoallv: {
      std::vector<int> counts = as_int(c.rank_counts()), offsets = as_int(c.rank_offsets());
      return check(MPI_Alltoallv(c.input(), counts.data(), offsets.data(), type, c.output(),
                                 counts.data(), offsets.data(), type, MPI_COMM_WORLD),
                   "MPI_Alltoallv");
    }
  }
  return internal_error("unknown collective");
}

}  // namespace tidegate::bench::mpi
