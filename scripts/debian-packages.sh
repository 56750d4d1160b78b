#!/usr/bin/env bash
# Builds polyhal's Debian source and binary packages with debhelper
# (debian/), as a Debian maintainer would: the committed tree as
# polyhal_<version>.orig.tar.xz, then dpkg-buildpackage, then lintian.
#   scripts/debian-packages.sh [OUT_DIR]      (default build/debian)
#   scripts/debian-packages.sh --from-build BUILD_DIR [OUT_DIR]
#       packages BUILD_DIR, a build of this tree configured with Debian's
#       install directories (CMAKE_INSTALL_PREFIX /usr, CMAKE_INSTALL_LIBDIR
#       lib/<multiarch>) and debug information for the -dbgsym packages,
#       instead of building again (debian/rules, POLYHAL_PREBUILT): the test
#       command's packages, where a second whole build does not fit CI's hour
# Needs debhelper and the Build-Depends of debian/control
# (scripts/install-deps.sh installs them). Packages land in OUT_DIR.
set -euo pipefail
command -v dh > /dev/null ||
  { echo "debian-packages: needs debhelper (apt-get install debhelper)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --from-build ]; then
  prebuilt=$(cd "${2:?debian-packages: --from-build needs a build folder}" && pwd)
  shift 2
  cache=$prebuilt/CMakeCache.txt
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  grep -qx "CMAKE_INSTALL_PREFIX:PATH=/usr" "$cache" &&
    grep -qx "CMAKE_INSTALL_LIBDIR:PATH=lib/$multiarch" "$cache" || {
    echo "debian-packages: $cache is not configured with Debian's install directories" \
      "(-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/$multiarch)" >&2
    exit 2
  }
  export POLYHAL_PREBUILT=$prebuilt
fi
out=$(mkdir -p "${1:-$root/build/debian}" && cd "${1:-$root/build/debian}" && pwd)
version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
upstream=${version%-*}
rm -rf "${out:?}"/*
# The package test reads the packaged objects' compile lines from this build.
if [ -n "${POLYHAL_PREBUILT:-}" ]; then echo "$POLYHAL_PREBUILT" > "$out/packaged-build"; fi
# The upstream tarball is the committed tree without debian/; a tree
# without its git history (the copy scripts/debian13-test.sh puts in the
# Debian 13 root) is taken as it is.
if git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$root" archive --format=tar --prefix="polyhal-$upstream/" HEAD -- . ':!debian' |
    xz -T0 -6 > "$out/polyhal_$upstream.orig.tar.xz"
  tar -C "$out" -xf "$out/polyhal_$upstream.orig.tar.xz"
  git -C "$root" archive --format=tar HEAD debian | tar -C "$out/polyhal-$upstream" -xf -
else
  tar -C "$root" --exclude=./debian --sort=name --transform "s,^\\.,polyhal-$upstream," -cf - . |
    xz -T0 -6 > "$out/polyhal_$upstream.orig.tar.xz"
  tar -C "$out" -xf "$out/polyhal_$upstream.orig.tar.xz"
  tar -C "$root" -cf - debian | tar -C "$out/polyhal-$upstream" -xf -
fi
(cd "$out/polyhal-$upstream" && dpkg-buildpackage -us -uc -j"$(nproc)") > "$out/build.log" 2>&1 ||
  { tail -60 "$out/build.log"; echo "FAIL: dpkg-buildpackage (log: $out/build.log)"; exit 1; }
changes=$(ls "$out"/polyhal_"$version"_*.changes)
# initial-upload-closes-no-bugs: these packages are polyhal's own, not an
# upload to Debian, so there is no ITP bug for the changelog to close.
# newer-standards-version: debian/control follows Debian 13's policy (4.7.2),
# which Debian 12's lintian does not know yet.
lintian --display-info --fail-on error,warning --suppress-tags initial-upload-closes-no-bugs,newer-standards-version \
  "$changes" | tee "$out/lintian.log"
ls "$out"/*.deb "$out"/*.dsc
