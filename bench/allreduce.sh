#!/usr/bin/env bash
# All-reduce bus bandwidth, in-process engine and MPI engine (2 ranks), each
# against memcpy in the same run. Usage: bench/allreduce.sh [build-dir]
set -euo pipefail
build=${1:-build}
bench="$build/bench/polyhal_allreduce_bench"
"$bench" --engine local --ranks 2
echo
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to none -np 2 "$bench" --engine mpi
