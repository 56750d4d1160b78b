#!/usr/bin/env bash
# The .deb packages as a user gets them: lintian finds nothing; unpacked
# into a fresh root, `polyhal plugins` sees three backends and runs a config;
# without the ipu package's files, ipu is gone and the rest still works.
# RPM distributions: packaging/rpm/polyhal.spec parses, names Fedora's
# packages, and rpmbuild makes a source RPM from the source tarball
# (dependency check skipped: Debian has no Fedora packages).
set -euo pipefail
build=${1:?usage: package_test.sh BUILD_DIR}
packages=$build/packages
shopt -s nullglob
debs=("$packages"/*.deb)
if [ ${#debs[@]} -lt 8 ]; then
  echo "FAIL: expected 8 .deb files in $packages; run 'cpack -G DEB' in $build first (scripts/test.sh does)"
  exit 1
fi
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source_dir=$(cd "$(dirname "$0")/.." && pwd)
unset POLYHAL_PLUGIN_PATH

echo "== lintian"
# Clean: no error, no warning, and no information tag but one. That one,
# hardening-no-fortify-functions, is lintian's heuristic: it fires on a
# binary none of whose libc calls has a size the compiler knows (the ipu and
# gaudi models, whose copies are std::vector's); the flag itself is checked
# below, on every object of the packaged binaries.
lintian --display-info --fail-on error,warning,info \
  --suppress-tags hardening-no-fortify-functions "${debs[@]}" || fail "lintian reported tags"
[ -f "$build/build.ninja" ] || fail "the fortify check reads build.ninja (scripts/build.sh's Ninja build)"
unfortified=$(awk '/^build (core|launcher|plugins|tools)\/[^ ]*\.cpp\.o: CXX_COMPILER/ { object = $2; next }
  object != "" && /^  DEFINES = / { if ($0 !~ /-D_FORTIFY_SOURCE=3/) print object; object = "" }' \
  "$build/build.ninja")
[ -z "$unfortified" ] || { echo "$unfortified"; fail "objects built without _FORTIFY_SOURCE=3"; }
fortified=$(grep -c -- "-D_FORTIFY_SOURCE=3" "$build/build.ninja")
[ "$fortified" -gt 50 ] || fail "expected the packaged objects' compile lines in build.ninja"

unpack() {  # unpack ROOT DEB...
  local root=$1; shift
  mkdir -p "$root"
  for deb in "$@"; do dpkg-deb -x "$deb" "$root"; done
}

echo "== package metadata"
library_deb=("$packages"/libpolyhal0.1_*.deb)
[ -f "${library_deb[0]}" ] || fail "no libpolyhal0.1 package (named by libpolyhal's SONAME)"
grep -q "libpolyhal0.1 (= " <<<"$(dpkg-deb -f "$packages"/polyhal_*.deb Depends)" ||
  fail "polyhal should depend on libpolyhal0.1 of its own version"
dpkg-deb -e "${library_deb[0]}" "$work/library-control"
[ -f "$work/library-control/symbols" ] || fail "libpolyhal0.1 lacks its symbols file"
grep -qx "activate-noawait ldconfig" "$work/library-control/triggers" || fail "no ldconfig trigger"
[ ! -e "$work/library-control/postinst" ] || fail "ldconfig by trigger: no postinst wanted"

# (No `| head` or `| grep -q` on a producer's output here: under pipefail
# the producer's SIGPIPE would fail the test at random.)
synopses=$(for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Description | sed -n 1p; done | sort -u | wc -l)
[ "$synopses" -eq ${#debs[@]} ] || fail "each package needs its own synopsis"
polyhal_deb=("$packages"/polyhal_*.deb)
grep -q polyhal-plugin-cpu <<<"$(dpkg-deb -f "${polyhal_deb[0]}" Recommends)" ||
  fail "polyhal should recommend polyhal-plugin-cpu"
# CPU inference (libpolyhal, polyhal, the CPU plugin) needs neither Open MPI
# nor HDF5: they come with the modules' packages.
for deb in "${library_deb[0]}" "${polyhal_deb[0]}" "$packages"/polyhal-plugin-cpu_*.deb; do
  depends=$(dpkg-deb -f "$deb" Depends Recommends)
  ! grep -Eq "openmpi|libhdf5" <<<"$depends" || fail "$(basename "$deb") pulls in MPI or HDF5: $depends"
done
grep -q libopenmpi <<<"$(dpkg-deb -f "$packages"/polyhal-module-mpi_*.deb Depends)" ||
  fail "polyhal-module-mpi should depend on Open MPI's library"
grep -q openmpi-bin <<<"$(dpkg-deb -f "$packages"/polyhal-module-mpi_*.deb Suggests)" ||
  fail "polyhal-module-mpi should suggest openmpi-bin (mpirun)"
grep -q libhdf5 <<<"$(dpkg-deb -f "$packages"/polyhal-module-hdf5_*.deb Depends)" ||
  fail "polyhal-module-hdf5 should depend on libhdf5"

echo "== all packages"
unpack "$work/all" "${debs[@]}"
out=$("$work/all/usr/bin/polyhal" plugins)
echo "$out"
grep -q "backends: cpu, gaudi, ipu" <<<"$out" || fail "expected three backends from the unpacked packages"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
grep -q "$work/all/usr/lib/$multiarch/polyhal/plugins (install)" <<<"$out" ||
  fail "the multiarch install dir is not searched relative to the executable"
[ -f "$work/all/usr/lib/$multiarch/libpolyhal.so.0.1.0" ] || fail "libpolyhal not in /usr/lib/$multiarch"
for backend in cpu ipu gaudi; do
  config=$work/all/usr/share/polyhal/configs/matmul-bench-$backend.yaml
  [ -f "$config" ] || fail "package lacks $config"
  "$work/all/usr/bin/polyhal" run --config "$config" --set 'matmul_bench.shapes=[[32,16,8]]' \
    --set matmul_bench.iterations=1 > "$work/run-$backend.log" 2>&1 || { cat "$work/run-$backend.log"; fail "run on $backend"; }
done
[ -f "$work/all/usr/include/polyhal/plugin.hpp" ] || fail "polyhal-dev lacks plugin.hpp"
# Plugin authors' conformance check, from polyhal-dev, on an installed backend.
"$work/all/usr/bin/polyhal-op-conformance" ipu --quick > "$work/conformance.log" 2>&1 ||
  { tail -20 "$work/conformance.log"; fail "polyhal-op-conformance ipu from the packages"; }
grep -q "^ipu: [0-9]* ok, 0 failed" "$work/conformance.log" || fail "polyhal-op-conformance should end with its summary"
for shipped in usr/share/doc/polyhal/README.md usr/share/doc/polyhal/docs/config.md \
               usr/share/doc/polyhal-dev/examples/template/CMakeLists.txt \
               usr/share/bash-completion/completions/polyhal usr/share/zsh/vendor-completions/_polyhal; do
  [ -f "$work/all/$shipped" ] || fail "the packages lack /$shipped"
done
[ -f "$work/all/usr/lib/$multiarch/cmake/polyhal/polyhalConfig.cmake" ] ||
  fail "polyhal-dev lacks the CMake package"

echo "== a shipped config, run by a normal user from the installed files"
# Relative paths are relative to the current directory: the pre-training
# demo writes its checkpoints there, never beside the config in /usr/share.
if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
  chmod 755 "$work"
  home=$(mktemp -d)
  chown 65534:65534 "$home"
  as_user() { (cd "$home" && setpriv --reuid=65534 --regid=65534 --clear-groups "$@"); }
  demo=$work/all/usr/share/polyhal/configs/pretrain-demo-cpu.yaml
  as_user "$work/all/usr/bin/polyhal" validate --config "$demo" > "$work/user.log" 2>&1 ||
    { cat "$work/user.log"; rm -rf "$home"; fail "validate of the shipped demo as a normal user"; }
  as_user "$work/all/usr/bin/polyhal" run --config "$demo" --set steps=2 --set checkpoint.every=1 \
    > "$work/user.log" 2>&1 ||
    { cat "$work/user.log"; rm -rf "$home"; fail "the shipped demo as a normal user"; }
  ls "$home"/polyhal-checkpoints/pretrain-demo/checkpoint-*.safetensors > /dev/null ||
    { rm -rf "$home"; fail "the demo's checkpoints should be in the current directory"; }
  rm -rf "$home"
else
  echo "skipped: needs root to run as another user"
fi

echo "== the HDF5 module, installed and not"
"$work/all/usr/bin/polyhal" prepare-data --input "$source_dir/tests/data/corpus/text" \
  --vocab "$source_dir/tests/data/corpus/vocab.txt" --output "$work/prepared" --dupe-factor 1 \
  > "$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; fail "prepare-data with polyhal-module-hdf5"; }
cpu_only=("${library_deb[0]}" "${polyhal_deb[0]}" "$packages"/polyhal-plugin-cpu_*.deb)
unpack "$work/cpu-only" "${cpu_only[@]}"
"$work/cpu-only/usr/bin/polyhal" run --config "$work/cpu-only/usr/share/polyhal/configs/bert-demo-cpu.yaml" \
  --set inference.iterations=2 > "$work/cpu-only.log" 2>&1 || { cat "$work/cpu-only.log"; fail "CPU inference without the modules"; }
set +e
"$work/cpu-only/usr/bin/polyhal" prepare-data --input "$source_dir/tests/data/corpus/text" \
  --vocab "$source_dir/tests/data/corpus/vocab.txt" --output "$work/not-prepared" > "$work/no-hdf5.log" 2>&1
code=$?
set -e
[ $code -eq 3 ] || { cat "$work/no-hdf5.log"; fail "prepare-data without polyhal-module-hdf5 should exit 3, got $code"; }
grep -q "install the package polyhal-module-hdf5" "$work/no-hdf5.log" || fail "the message should name polyhal-module-hdf5"

echo "== without polyhal-plugin-ipu"
without_ipu=()
for deb in "${debs[@]}"; do [[ $(basename "$deb") == polyhal-plugin-ipu_* ]] || without_ipu+=("$deb"); done
unpack "$work/no-ipu" "${without_ipu[@]}"
out=$("$work/no-ipu/usr/bin/polyhal" plugins)
grep -q "backends: cpu, gaudi$" <<<"$out" || { echo "$out"; fail "ipu should be gone, cpu and gaudi left"; }
set +e
"$work/no-ipu/usr/bin/polyhal" devices --backend ipu > "$work/ipu.log" 2>&1
code=$?
set -e
[ $code -eq 3 ] || fail "devices --backend ipu without its package should exit 3, got $code"
grep -q "install package polyhal-plugin-ipu" "$work/ipu.log" || fail "message should name the package to install"
"$work/no-ipu/usr/bin/polyhal" devices --backend gaudi > /dev/null || fail "gaudi must keep working"

echo "== rpm spec"
spec=$source_dir/packaging/rpm/polyhal.spec
version=$(rpmspec -q --qf '%{VERSION}\n' "$spec" 2>/dev/null | sed -n 1p)
[ -n "$version" ] || fail "the spec does not parse"
buildrequires=$(rpmspec -q --buildrequires "$spec" 2>/dev/null)
for name in boost-devel hdf5-devel onednn-devel tbb-devel openmpi-devel yaml-cpp-devel; do
  grep -q "^$name" <<<"$buildrequires" || fail "the spec should build-require $name (Fedora's name)"
done
names=$(rpmspec -q --qf '%{NAME}\n' "$spec" 2>/dev/null)
grep -qx polyhal-devel <<<"$names" || fail "no polyhal-devel"
grep -q "^boost-devel" <<<"$(rpmspec -q --requires "$spec" 2>/dev/null)" ||
  fail "polyhal-devel should require boost-devel"
mkdir -p "$work/rpm/SOURCES"
tar czf "$work/rpm/SOURCES/polyhal-$version.tar.gz" --exclude='./build*' --exclude=./.git \
  --transform "s,^\.,polyhal-$version," -C "$source_dir" .
rpmbuild -bs --nodeps --define "_topdir $work/rpm" "$spec" > "$work/rpmbuild.log" 2>&1 ||
  { cat "$work/rpmbuild.log"; fail "rpmbuild -bs"; }
ls "$work/rpm/SRPMS/polyhal-$version-1"*.src.rpm > /dev/null || fail "no source rpm"
echo "package test: passed"
