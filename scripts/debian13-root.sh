#!/usr/bin/env bash
# Makes a clean Debian 13 ("trixie") root with polyhal's build and test
# dependencies, from Debian's own packages (debootstrap), and caches it in
# the build folder: it is made again only when its package list changes.
#   debian13-root.sh [DIR]      DIR defaults to build/debian13; prints the root's path
# The root is what scripts/debian13-test.sh builds, tests and packages in.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/debian13}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# scripts/install-deps.sh's build and test packages as Debian 13 names them
# (the same names: its t64 library renames sit behind these -dev packages).
packages=(
  build-essential cmake ninja-build pkgconf
  libdnnl-dev libtbb-dev libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libicu-dev libprotobuf-dev protobuf-compiler zlib1g-dev
  libopenmpi-dev openmpi-bin libhdf5-dev
  libgtest-dev libgmock-dev python3
  file dpkg-dev debhelper lintian fakeroot rpm
)
# The host's tools: debootstrap makes the root, rsync copies the tree into it.
for tool in debootstrap rsync; do
  command -v "$tool" >/dev/null && continue
  [ "$(id -u)" -eq 0 ] || { echo "debian13-root: needs $tool (apt-get install $tool)" >&2; exit 2; }
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$tool" >&2
done
key=$(printf '%s\n' trixie "$mirror" "${packages[@]}" | sha256sum | cut -c1-16)
root="$dir/root"
if [ -f "$dir/ready-$key" ] && [ -x "$root/usr/bin/cmake" ]; then
  echo "$root"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "debian13-root: debootstrap needs root (run with sudo)" >&2; exit 2; }
rm -rf "$root" "$dir"/ready-*
mkdir -p "$dir"
echo "debian13-root: making a Debian 13 root in $root (a few minutes, once)" >&2
log="$dir/root.log"
fail() {
  tail -20 "$log" >&2
  echo "debian13-root: $1 failed; the whole log is $log" >&2
  exit 1
}
# debootstrap makes the base system; apt inside the root installs the rest
# (debootstrap's own resolver does not follow virtual packages).
debootstrap --variant=minbase trixie "$root" "$mirror" >"$log" 2>&1 || fail debootstrap
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no services start in a root
chmod +x "$root/usr/sbin/policy-rc.d"
{
  chroot "$root" apt-get update -q &&
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "${packages[@]}" &&
    chroot "$root" apt-get clean
} >>"$log" 2>&1 || fail "apt-get install in the root"
touch "$dir/ready-$key"
echo "$root"
