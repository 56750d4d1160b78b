#!/usr/bin/env bash
# Installs the Debian 13 packages (built by scripts/debian13-test.sh --ci in
# the build root's /build/debian) into a fresh, minimal Debian 13 root with
# apt, and runs debian/tests there with autopkgtest, as Debian's CI runs a
# package's tests: each test's Depends installed from Debian 13, the test
# run on the installed files.
#   debian13-autopkgtest.sh
# The minimal root (debootstrap's minbase) is cached as build/debian13/minbase.tar;
# every run unpacks it afresh into build/debian13/fresh.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/debian13
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
build_root=$(scripts/debian13-root.sh)
debs=$build_root/build/debian
source_dir=$(ls -d "$debs"/polyhal-*/ 2>/dev/null | head -1)
[ -n "$source_dir" ] && [ -d "$source_dir/debian/tests" ] ||
  { echo "debian13-autopkgtest: no packages in $debs: run scripts/debian13-test.sh --ci first" >&2; exit 2; }
if [ ! -f "$dir/minbase.tar" ]; then
  rm -rf "$dir/minbase"
  debootstrap --variant=minbase trixie "$dir/minbase" "$mirror" > "$dir/minbase.log" 2>&1 ||
    { tail -20 "$dir/minbase.log"; echo "debian13-autopkgtest: debootstrap failed" >&2; exit 1; }
  tar -C "$dir/minbase" -cf "$dir/minbase.tar.part" . && mv "$dir/minbase.tar.part" "$dir/minbase.tar"
  rm -rf "$dir/minbase"
fi
fresh=$dir/fresh
rm -rf "$fresh" && mkdir -p "$fresh"
tar -C "$fresh" -xf "$dir/minbase.tar"
cp /etc/resolv.conf "$fresh/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' > "$fresh/usr/sbin/policy-rc.d" && chmod +x "$fresh/usr/sbin/policy-rc.d"
mkdir -p "$fresh/packages" "$fresh/source"
find "$debs" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' -exec cp {} "$fresh/packages/" \;
cp -r "$source_dir/debian" "$fresh/source/"
export DEBIAN13_ROOT=$fresh
scripts/debian13-run.sh bash -c 'apt-get update -q > /tmp/apt.log &&
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends autopkgtest \
    >> /tmp/apt.log' || { tail -20 "$fresh/tmp/apt.log"; exit 1; }
# -B: the given packages, not a build of the source; null: this root is the testbed.
scripts/debian13-run.sh bash -c 'autopkgtest -B /packages/*.deb /source/ -- null'
