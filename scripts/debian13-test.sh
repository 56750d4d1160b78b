#!/usr/bin/env bash
# Builds polyhal in a clean Debian 13 root (scripts/debian13-root.sh) with
# GCC 14 and warnings as errors, against Debian 13's oneDNN 3 and Open MPI
# 5, builds its Debian packages there, and runs the test suite there.
#   debian13-test.sh [CTEST_ARGS...]     ctest's arguments (default: the whole suite, as test.sh)
# The source is copied into the root's /src (what git tracks or would
# track); the root's /build is kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(scripts/debian13-root.sh)
mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard |
  rsync -a --delete --from0 --files-from=- ./ "$root/src/"
start=$SECONDS
scripts/debian13-run.sh bash -c 'cd /src && POLYHAL_BUILD_DIR=/build scripts/build.sh \
  -DPOLYHAL_WARNINGS_AS_ERRORS=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"'
echo "debian13-test: built in $((SECONDS - start)) s (gcc $(scripts/debian13-run.sh gcc -dumpversion))"
# The packages the package tests check, and the real model (fetched here,
# where pip is: the root has no Python packaging tools).
if [ $# -eq 0 ]; then
  scripts/debian13-run.sh bash -c 'cd /src && scripts/debian-packages.sh /build/debian'
fi
scripts/fetch-real-model.sh "$root/build"
# shellcheck source=scripts/ctest-groups.sh
source scripts/ctest-groups.sh
if [ $# -gt 0 ]; then
  scripts/debian13-run.sh bash -c 'cd /build && ctest --output-on-failure --timeout 900 "$@"' ctest "$@"
else
  scripts/debian13-run.sh bash -c "cd /build && ctest --output-on-failure --timeout 900 -j $(nproc) \
    -E '$serial_tests' && ctest --output-on-failure --timeout 900 -R '$serial_tests'"
fi
