#!/usr/bin/env bash
# Runs one test under mpirun with one of the three MPI set-ups of the transports issue:
#   mpirun_setup.sh MPIEXEC PROBE SETUP NP PROGRAM [ARGS...]    SETUP = vader | tcp | ucx
# First starts PROBE (MPI_Init + Allreduce) with the set-up; when that fails the set-up is not
# usable on this machine (e.g. no UCX device) and the test is skipped with exit code 77 and the
# reason, never passed. Otherwise runs PROGRAM on NP ranks and returns mpirun's exit code.
set -u
mpiexec=$1 probe=$2 setup=$3 np=$4
shift 4
case "$setup" in
  vader) mca=(--mca btl self,vader) ;;
  tcp) mca=(--mca btl self,tcp) ;;
  ucx) mca=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
  *) echo "mpirun_setup.sh: unknown set-up '$setup'" >&2; exit 2 ;;
esac
common=(--oversubscribe --bind-to none "${mca[@]}")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! out=$(timeout 30 "$mpiexec" "${common[@]}" -np 2 "$probe" 2>&1); then
  echo "SKIP: MPI set-up '$setup' (${mca[*]}) cannot start MPI on this machine:"
  echo "$out" | tail -n 15
  exit 77
fi
# The guard keeps a hang from outliving CTest's own timeout with orphaned ranks.
exec timeout --kill-after=5 100 "$mpiexec" "${common[@]}" -np "$np" "$@"
