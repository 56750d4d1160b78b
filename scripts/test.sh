#!/usr/bin/env bash
# Sets everything up, builds with warnings as errors, builds the packages,
# and runs every test (unit, plugin boundary, launcher, packages, out-of-tree
# plugin) through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
POLYHAL_BUILD_DIR=$build "$root/scripts/build.sh" -DPOLYHAL_WARNINGS_AS_ERRORS=ON
(cd "$build" && cpack -G DEB > cpack.log 2>&1) || { cat "$build/cpack.log"; exit 1; }
# The real pretrained model the RealModel tests compare (83 MB, once, cached in the build).
"$root/scripts/fetch-real-model.sh" "$build"
(cd "$build" && ctest --output-on-failure --timeout 900 "$@")
# RPM distributions: the spec's build, install and %files, from the tarball.
POLYHAL_RPM_DIR=$build/rpm "$root/scripts/rpm-check.sh" > "$build/rpm-check.log" 2>&1 ||
  { tail -40 "$build/rpm-check.log"; echo "FAIL: scripts/rpm-check.sh"; exit 1; }
# Untrusted-input hardening: every fuzz target for a bounded time, and the
# suite again under ASan+UBSan (docs/hardening.md).
FUZZ_SECONDS=${FUZZ_SECONDS:-10} "$root/scripts/fuzz.sh"
"$root/scripts/sanitize.sh"
