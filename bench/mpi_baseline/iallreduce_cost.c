/* What MPI's own nonblocking allreduce costs against its blocking one, for the small sizes of
 * issue 15. tidegate's "mpi/native" choice must run MPI_Iallreduce and poll it (a blocking
 * MPI_Allreduce has no deadline, and tidegate keeps one on every wait), so this is the floor
 * of that choice before tidegate adds anything: if MPI_Iallreduce alone is slower than
 * MPI_Allreduce, "mpi/native at 0.95x of MPI_Allreduce" is out of reach by that much.
 *
 * For each size (float32 sum, 4 B to 64 KiB, factor 4): ITERS timed iterations after WARMUP,
 * each started after MPI_Barrier, of (a) MPI_Allreduce, (b) MPI_Iallreduce + MPI_Wait,
 * (c) MPI_Iallreduce + an MPI_Test loop (how tidegate's mpi transport polls), interleaved per
 * iteration so that drift hits the three alike. An iteration's time is the slowest rank's.
 * Rank 0 prints medians (us) and one JSON line per size.
 *
 *   mpirun -np 4 build/bench/mpi_baseline/mpi-iallreduce-cost [ITERS=50] [WARMUP=10]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int n) {
  qsort(values, (size_t)n, sizeof *values, compare_doubles);
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* One iteration of variant v on `count` floats; returns the slowest rank's seconds. */
static double run_once(int v, float* in, float* out, int count) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  if (v == 0) {
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    MPI_Request request;
    MPI_Iallreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    if (v == 1) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      int done = 0;
      while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
  }
  double mine = MPI_Wtime() - start, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int iters = argc > 1 ? atoi(argv[1]) : 50;
  const int warmup = argc > 2 ? atoi(argv[2]) : 10;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (iters < 1 || warmup < 0) {
    if (rank == 0) fprintf(stderr, "usage: mpi-iallreduce-cost [ITERS>=1] [WARMUP>=0]\n");
    MPI_Finalize();
    return 2;
  }
  const int max_count = 16384; /* 64 KiB of float32 */
  float* in = malloc(sizeof(float) * max_count);
  float* out = malloc(sizeof(float) * max_count);
  double* times[3];
  for (int v = 0; v < 3; ++v) times[v] = malloc(sizeof(double) * (size_t)iters);
  for (int i = 0; i < max_count; ++i) in[i] = (float)(rank + i % 7);
  if (rank == 0) {
    printf("# %d ranks, float32 sum, medians of %d iterations after %d warm-up (us)\n", size,
           iters, warmup);
    printf("| size | MPI_Allreduce | MPI_Iallreduce+Wait | MPI_Iallreduce+Test loop |"
           " Allreduce/Iallreduce(Test) |\n|---|---|---|---|---|\n");
  }
  for (int count = 1; count <= max_count; count *= 4) {
    for (int i = 0; i < warmup + iters; ++i) {
      for (int v = 0; v < 3; ++v) {
        const double t = run_once(v, in, out, count);
        if (i >= warmup) times[v][i - warmup] = t * 1e6;
      }
    }
    if (rank == 0) {
      double m[3];
      for (int v = 0; v < 3; ++v) m[v] = median(times[v], iters);
      printf("| %d B | %.1f | %.1f | %.1f | %.2fx |\n", count * 4, m[0], m[1], m[2], m[0] / m[2]);
      fprintf(stderr,
              "{\"bytes\": %d, \"ranks\": %d, \"allreduce_us\": %.2f, \"iallreduce_wait_us\": "
              "%.2f, \"iallreduce_test_us\": %.2f}\n",
              count * 4, size, m[0], m[1], m[2]);
    }
  }
  for (int v = 0; v < 3; ++v) free(times[v]);
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
