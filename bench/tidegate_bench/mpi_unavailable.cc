// tidegate-bench's MPI functions in a build without MPI: every entry point says so.
#include <cstdlib>

#include "bench/tidegate_bench/mpi_support.h"

namespace tidegate::bench::mpi {

namespace {
Status no_mpi() {
  return unsupported(
      "tidegate-bench was built without MPI (configure with TIDEGATE_WITH_MPI=ON); "
      "run it under tidegate-run instead");
}
}  // namespace

bool built() { return false; }
Status init(int*, char***) { return no_mpi(); }
void finalize() {}
Status create_comm(tidegate_comm_t*) { return no_mpi(); }
void abort_job(int code) { std::exit(code); }
bool supports(const BenchCase&, std::string* why) {
  *why = "no MPI in this build";
  return false;
}
Status barrier() { return no_mpi(); }
Status run(BenchCase&) { return no_mpi(); }

}  // namespace tidegate::bench::mpi
