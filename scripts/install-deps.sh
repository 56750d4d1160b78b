#!/usr/bin/env bash
# Installs what polyhal needs from Debian 12's own packages. Safe to run
# again: apt skips what is already there.
#   install-deps.sh          everything: build, test, package, fuzz, sanitize (scripts/test.sh)
#   install-deps.sh demo     only what building the launcher and the CPU plugin needs (scripts/demo.sh)
set -euo pipefail
profile=${1:-all}
# The launcher, libpolyhal and the CPU plugin.
packages=(
  build-essential cmake ninja-build pkgconf
  libdnnl-dev libtbb-dev libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libicu-dev libprotobuf-dev protobuf-compiler zlib1g-dev
)
case $profile in
  demo) ;;
  all)
    packages+=(
      libopenmpi-dev openmpi-bin libhdf5-dev          # the MPI and HDF5 modules, and their tests
      libgtest-dev libgmock-dev python3 python3-pip python3-venv  # the test suite (and its HTTP clients)
      file dpkg-dev debhelper lintian rpm              # the packages and their checks
      clang-format clang libclang-rt-14-dev            # format check, fuzzing, ASan/UBSan
      chromium iproute2                                # README pictures, namespace "hosts"
    )
    ;;
  *) echo "usage: install-deps.sh [demo|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
# Through env: sudo resets the environment, so DEBIAN_FRONTEND before sudo
# would not reach apt-get (and debconf would ask questions of a script).
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
