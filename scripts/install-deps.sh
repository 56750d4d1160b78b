#!/usr/bin/env bash
# Installs everything polyhal needs to build, test and package, from Debian 12's
# own packages. Safe to run again: apt skips what is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config file dpkg-dev python3 python3-pip
  libdnnl-dev libtbb-dev libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libicu-dev libprotobuf-dev protobuf-compiler zlib1g-dev libopenmpi-dev openmpi-bin libhdf5-dev lintian rpm clang-format
  clang libclang-rt-14-dev
  chromium iproute2
)
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
