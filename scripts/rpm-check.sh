#!/usr/bin/env bash
# Builds the binary RPMs from the source tarball with packaging/rpm/polyhal.spec,
# as a Fedora/RHEL build would, here on Debian: dependency check skipped
# (Debian has none of Fedora's packages; Debian's libraries stand in), so
# what this checks is the spec's build and install steps and its %files
# lists (an installed file no %files list claims fails the build). Run by
# hand: a whole build without tests, about 5.5 minutes here, so not part of
# scripts/test.sh; CI checks the %files lists against the Debian package
# build's installed tree instead (tests/rpm_files_check.py, in
# tests/package_test.sh). The RPMs it makes are not for distribution.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${POLYHAL_RPM_DIR:-$root/build-rpm}
spec=$root/packaging/rpm/polyhal.spec
version=$(rpmspec -q --qf '%{VERSION}\n' "$spec" | sed -n 1p)
rm -rf "$work" && mkdir -p "$work/SOURCES"
tar czf "$work/SOURCES/polyhal-$version.tar.gz" --exclude='./build*' --exclude=./.git \
  --transform "s,^\.,polyhal-$version," -C "$root" .
rpmbuild -bb --nodeps --define "_topdir $work" --define "_smp_mflags -j$(nproc)" "$spec"
ls -l "$work"/RPMS/*/
