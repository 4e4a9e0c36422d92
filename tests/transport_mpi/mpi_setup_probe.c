/* Starts MPI and does one collective: exits 0 only when the chosen MPI set-up works here. */
#include <mpi.h>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return sum >= 1 ? 0 : 1;
}
