#!/usr/bin/env bash
# Sets everything up and runs every check CI runs, on Debian 12: builds
# with warnings as errors, builds the Debian packages (debhelper), runs
# every test (unit, plugin boundary, launcher, packages and the RPM spec,
# out-of-tree plugin) through ctest, and fuzzes every parser. Ends with the
# time each phase took (the whole must stay under CI's 60 minutes on 2
# cores: about 45 on an AVX2-only AMD EPYC, the slowest CPU seen). Run by
# hand, because that hour has no room for them: the Debian 13 leg
# (scripts/debian13-test.sh --ci, about 40 minutes there: a clean root, the
# packages built with warnings as errors under GCC 14 against oneDNN 3 and
# Open MPI 5, lintian, the package tests, autopkgtest, the release tests),
# the whole suite on Debian 13 (scripts/debian13-test.sh), the suite under
# ASan and UBSan (scripts/sanitize.sh, about 15 minutes) and the binary RPM
# build (scripts/rpm-check.sh, a third whole build, about 5.5); the package
# test checks the spec's %files lists without it.
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
# Debug information as line tables (-g1): a third less compile time than
# -g, and enough for the -dbgsym packages the package test checks. Debian's
# install directories, so that the packages below are this build.
phase "build" env POLYHAL_BUILD_DIR="$build" "$root/scripts/build.sh" -DPOLYHAL_WARNINGS_AS_ERRORS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DCMAKE_INSTALL_PREFIX=/usr \
  "-DCMAKE_INSTALL_LIBDIR=lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
# The .deb packages the package tests check: debhelper packages the build
# above (--from-build; a second whole build with Debian's flags does not fit
# CI's hour on 2 cores: scripts/debian-packages.sh alone does it, and so
# does the Debian 13 leg, scripts/debian13-test.sh --ci).
phase "Debian packages" env DEB_BUILD_OPTIONS=nocheck \
  "$root/scripts/debian-packages.sh" --from-build "$build" "$build/debian"
# The real pretrained model the RealModel tests compare (83 MB, once, cached in the build).
phase "real model" "$root/scripts/fetch-real-model.sh" "$build"
phase "HTTP clients" "$root/scripts/client-venv.sh" "$build"
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
# Untrusted-input hardening: every fuzz target, under ASan+UBSan, for a
# bounded time (docs/hardening.md), built at -O0 -g1 for these few seconds.
phase "fuzzing" env FUZZ_SECONDS="${FUZZ_SECONDS:-5}" FUZZ_OPT="${FUZZ_OPT:--O0 -g1}" "$root/scripts/fuzz.sh"
echo "== time per phase (total $SECONDS s)"
printf '%s\n' "${phases[@]}"
