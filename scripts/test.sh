#!/usr/bin/env bash
# Sets everything up and runs every check CI runs, on two Debian releases:
# natively (Debian 12): builds with warnings as errors, builds the Debian
# packages (debhelper), runs every test (unit, plugin boundary, launcher,
# packages and the RPM spec, out-of-tree plugin) through ctest, and fuzzes
# every parser; then in a clean Debian 13 root (scripts/debian13-test.sh
# --ci): the packages built as Debian builds them, with warnings as errors
# under GCC 14 and the unit, kernel and launcher tests run against oneDNN 3
# and Open MPI 5, lintian, the package tests, and the release-specific
# tests. Ends with the time each phase took (the whole must stay under CI's
# 60 minutes on 2 cores). Run by hand, not here: the suite under ASan and
# UBSan (scripts/sanitize.sh, about 15 minutes), the whole suite on Debian
# 13 (scripts/debian13-test.sh, about 35), the binary RPM build
# (scripts/rpm-check.sh, a third whole build, about 5.5); the package test
# checks the spec's %files lists without it.
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
# (a second build: Debian's flags; nocheck: the suite runs below).
phase "Debian packages" env DEB_BUILD_OPTIONS=nocheck "$root/scripts/debian-packages.sh" "$build/debian"
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
# bounded time (docs/hardening.md).
phase "fuzzing" env FUZZ_SECONDS="${FUZZ_SECONDS:-5}" "$root/scripts/fuzz.sh"
# Given ctest options, only those tests, natively. The Debian 13 root needs
# root with mounts (debootstrap, chroot); a machine without them says so.
if [ $# -eq 0 ]; then
  if [ "$(id -u)" -eq 0 ] && unshare --mount true 2> /dev/null; then
    phase "Debian 13 (root, packages, tests)" "$root/scripts/debian13-test.sh" --ci
  else
    echo "== SKIPPED: the Debian 13 leg needs root with mount rights (debootstrap, chroot);" \
      "run sudo scripts/debian13-test.sh --ci where they are"
    phases+=("Debian 13: skipped (no root with mount rights)")
  fi
fi
echo "== time per phase (total $SECONDS s)"
printf '%s\n' "${phases[@]}"
