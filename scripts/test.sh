#!/usr/bin/env bash
# Sets everything up, builds with warnings as errors, builds the Debian
# packages (debhelper), and runs every test (unit, plugin boundary, launcher,
# packages and the RPM spec, out-of-tree plugin) through ctest; then fuzzing
# and the sanitized suite. Ends with the time each phase took (the whole
# must stay under CI's 60 minutes on 2 cores). The binary RPM build is
# scripts/rpm-check.sh, by hand: a third whole build (about 5.5 minutes);
# the package test checks the spec's %files lists without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
phases=()
phase() {  # phase NAME COMMAND...: runs it and records how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  phases+=("$(printf '%-28s %5d s' "$name" $((SECONDS - start)))")
}
phase "install dependencies" "$root/scripts/install-deps.sh"
# Without debug information (-O2 as RelWithDebInfo, no -g): a third less
# compile time; scripts/build.sh alone builds with it, for a debugger.
phase "build" env POLYHAL_BUILD_DIR="$build" "$root/scripts/build.sh" -DPOLYHAL_WARNINGS_AS_ERRORS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
# The .deb packages the package tests check, built as Debian builds them
# (a second build: Debian's flags, no tests).
phase "Debian packages" "$root/scripts/debian-packages.sh" "$build/debian"
# The real pretrained model the RealModel tests compare (83 MB, once, cached in the build).
phase "real model" "$root/scripts/fetch-real-model.sh" "$build"
# shellcheck source=scripts/ctest-groups.sh
source "$root/scripts/ctest-groups.sh"
# Two at a time, then the serial ones alone; as asked when given ctest options.
run_ctest() {
  cd "$build"
  if [ $# -gt 0 ]; then
    ctest --output-on-failure --timeout 900 "$@"
  else
    ctest --output-on-failure --timeout 900 -j "$(nproc)" -E "$serial_tests"
    ctest --output-on-failure --timeout 900 -R "$serial_tests"
  fi
  cd "$root"
}
phase "ctest" run_ctest "$@"
# Untrusted-input hardening: every fuzz target for a bounded time, and the
# suite again under ASan+UBSan (docs/hardening.md).
phase "fuzzing" env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" "$root/scripts/fuzz.sh"
phase "sanitized suite" "$root/scripts/sanitize.sh"
echo "== time per phase (total $SECONDS s)"
printf '%s\n' "${phases[@]}"
