#!/bin/sh
# Runs a command on 2 MPI ranks of this machine: run_mpi.sh PROGRAM [ARGS...]
# (--oversubscribe: more ranks than cores is fine; as root, mpirun wants --allow-run-as-root).
set -eu
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
# shellcheck disable=SC2086
exec mpirun -np "${GRAFT_TEST_RANKS:-2}" --oversubscribe $root --bind-to none \
  -x OMP_NUM_THREADS=1 "$@"
