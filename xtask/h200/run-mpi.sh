#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl`, `.mpi` and `.h200/test-mpi`,
# `.h200/mpi_bench` carried; `cargo xtask device-bundle` makes them):
#   bash xtask/h200/run-mpi.sh
# The MPI suite (3 processes, each its own device of the one GPU), then the
# MPI all-reduce figures (`collective.mpi_all_reduce_*`, written to
# $OUT/report-mpi.json when OUT is set).
set -u
cd "$(dirname "$0")/../.."
source xtask/h200/env.sh
source xtask/h200/mpi-env.sh
mpirun=xtask/h200/mpirun.sh
echo "commit $(cat .h200/COMMIT 2>/dev/null)"
COMPUTE_COLLECTIVE_TIMEOUT_MS=20000 timeout 300 $mpirun --mca mpi_yield_when_idle 1 -np 3 \
  .h200/test-mpi suite 2>&1 | grep -E "test result|FAILED|panicked" || echo "no MPI suite result"
out="${OUT:-/tmp}/report-mpi.json"
timeout 400 $mpirun -np 3 .h200/mpi_bench --out "$out" ${MPI_BENCH_ARGS:-}
