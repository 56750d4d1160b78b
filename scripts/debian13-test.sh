#!/usr/bin/env bash
# Builds polyhal in a clean Debian 13 root (scripts/debian13-root.sh) with
# GCC 14 and warnings as errors, against Debian 13's oneDNN 3 and Open MPI
# 5, and runs the test suite there.
#   debian13-test.sh [CTEST_ARGS...]     ctest's arguments (default: the whole suite, as test.sh)
# The source is copied into the root (what git tracks or would track), the
# build folder inside the root is kept between runs.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"
root=$(scripts/debian13-root.sh)
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# The CPU plugin reads /proc/cpuinfo; Open MPI wants /dev/shm.
for fs in proc dev dev/shm; do
  if ! mountpoint -q "$root/$fs"; then
    if [ "$fs" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind "/$fs" "$root/$fs"; fi
    mounted+=("$root/$fs")
  fi
done
mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard |
  rsync -a --delete --from0 --files-from=- ./ "$root/src/"
in_root() { chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
start=$SECONDS
in_root bash -c 'cd /src && POLYHAL_BUILD_DIR=/build scripts/build.sh -DPOLYHAL_WARNINGS_AS_ERRORS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"'
echo "debian13-test: built in $((SECONDS - start)) s (gcc $(in_root gcc -dumpversion))"
# shellcheck source=scripts/ctest-groups.sh
source scripts/ctest-groups.sh
if [ $# -gt 0 ]; then
  in_root bash -c 'cd /build && ctest --output-on-failure --timeout 900 "$@"' ctest "$@"
else
  in_root bash -c "cd /build && ctest --output-on-failure --timeout 900 -j $(nproc) -E '$serial_tests' &&
    ctest --output-on-failure --timeout 900 -R '$serial_tests'"
fi
