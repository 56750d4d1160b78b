#!/usr/bin/env bash
# Builds and tests polyhal in a clean Debian 13 root (scripts/debian13-root.sh:
# GCC 14, oneDNN 3, Open MPI 5) from a copy of the tree (what git tracks or
# would track, in the root's /src; the root's /build is kept between runs).
#   debian13-test.sh [CTEST_ARGS...]   the whole check: a build with warnings as
#       errors, the Debian packages, then the whole suite as scripts/test.sh
#       runs it (about 35 minutes on 2 cores); with ctest's arguments, the
#       build and just those tests
#   debian13-test.sh --ci              CI's Debian 13 leg (scripts/test.sh, about
#       15 minutes): the packages built as Debian builds them, with warnings as
#       errors and the unit, kernel and launcher tests run in the package build
#       (debian/rules), lintian, the package tests, the autopkgtests on the
#       packages installed in a fresh root (debian13-autopkgtest.sh), and the
#       tests of what differs between releases
#       (ABI symbols, Open MPI 5's signals, oneDNN 3's numbers at real sizes,
#       the out-of-tree plugin build) from the package build's tree
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(scripts/debian13-root.sh)
mkdir -p "$root/src"
tree_files=$(mktemp)
trap 'rm -f "$tree_files"' EXIT
git ls-files -z --cached --others --exclude-standard | LC_ALL=C sort -z >"$tree_files"
rsync -a --from0 --files-from="$tree_files" ./ "$root/src/"
# rsync's --delete does nothing with --files-from, so a file gone from the
# tree (deleted or renamed) would stay in /src and be built: removed here.
(cd "$root/src" && find . ! -type d -printf '%P\0' | LC_ALL=C sort -z) |
  LC_ALL=C comm -z -23 - "$tree_files" | (cd "$root/src" && xargs -0 -r rm -f --)
# shellcheck source=scripts/ctest-groups.sh
source scripts/ctest-groups.sh
in_root() { scripts/debian13-run.sh bash -c "$1"; }
if [ "${1:-}" = --ci ]; then
  start=$SECONDS
  # The packages are built from the committed tree, as a Debian build is
  # from its source package: the copy in /src is what git tracks.
  in_root 'cd /src && DEB_BUILD_PROFILES=pkg.polyhal.werror scripts/debian-packages.sh /build/debian' ||
    { echo "FAIL: Debian 13 package build (its log: $root/build/debian/build.log)"; exit 1; }
  grep -E "tests passed|Total Test time" "$root/build/debian/build.log"
  echo "debian13-test: packages built and tested in $((SECONDS - start)) s (gcc $(in_root 'gcc -dumpversion'))"
  in_root 'bash /src/tests/package_test.sh /build'
  scripts/debian13-autopkgtest.sh
  tree=/build/debian/polyhal-$(dpkg-parsechangelog -l debian/changelog -S Version | sed 's/-[^-]*$//')/obj-x86_64-linux-gnu
  scripts/fetch-real-model.sh "$root$tree"
  in_root "cd $tree && ctest --output-on-failure --timeout 900 -R '$release_tests'"
  exit 0
fi
start=$SECONDS
in_root 'cd /src && POLYHAL_BUILD_DIR=/build scripts/build.sh \
  -DPOLYHAL_WARNINGS_AS_ERRORS=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"'
echo "debian13-test: built in $((SECONDS - start)) s (gcc $(in_root 'gcc -dumpversion'))"
# The packages the package tests check, and the real model (fetched here,
# where pip is: the root has no Python packaging tools).
if [ $# -eq 0 ]; then
  in_root 'cd /src && DEB_BUILD_OPTIONS=nocheck scripts/debian-packages.sh /build/debian'
fi
scripts/fetch-real-model.sh "$root/build"
if [ $# -gt 0 ]; then
  scripts/debian13-run.sh bash -c 'cd /build && ctest --output-on-failure --timeout 900 "$@"' ctest "$@"
else
  in_root "cd /build && ctest --output-on-failure --timeout 900 -j $(nproc) -E '$serial_tests' &&
    ctest --output-on-failure --timeout 900 -R '$serial_tests'"
fi
