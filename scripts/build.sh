#!/usr/bin/env bash
# Configures and builds polyhal into ${POLYHAL_BUILD_DIR:-build}.
#   build.sh [CMAKE_ARGS...]          everything: the plugins, modules, tests, benchmarks
#   build.sh --demo [CMAKE_ARGS...]   the launcher, libpolyhal and the CPU plugin only
# Each run states every part, so a full build after a demo build (or the
# other way round) in the same directory builds what it says.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
parts=ON
if [ "${1:-}" = "--demo" ]; then
  parts=OFF
  shift
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG" \
  -DBUILD_TESTING=$parts -DPOLYHAL_BENCH=$parts -DPOLYHAL_DEV_TOOLS=$parts -DPOLYHAL_MODULE_MPI=$parts \
  -DPOLYHAL_MODULE_HDF5=$parts -DPOLYHAL_PLUGIN_IPU=$parts -DPOLYHAL_PLUGIN_GAUDI=$parts \
  -DPOLYHAL_PLUGIN_CPU=ON "$@"
cmake --build "$build" --parallel "$(nproc)"
