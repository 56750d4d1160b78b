#!/usr/bin/env bash
# The Debian packages (scripts/debian-packages.sh, debhelper) as a user gets
# them: lintian finds nothing; the metadata debhelper writes is there;
# unpacked into a fresh root, debian/tests' autopkgtests pass, a normal user
# runs a shipped config, CPU inference needs no module, and without the ipu
# package's files, ipu is gone and the rest still works.
# RPM distributions: packaging/rpm/polyhal.spec parses, names Fedora's
# packages, rpmbuild makes a source RPM from the source tarball (dependency
# check skipped: Debian has no Fedora packages), and its %files lists cover
# exactly what is installed.
set -euo pipefail
build=${1:?usage: package_test.sh BUILD_DIR}
packages=$build/debian
shopt -s nullglob
debs=() dbgsyms=()
for deb in "$packages"/*.deb; do
  if [[ $(basename "$deb") == *-dbgsym_* ]]; then dbgsyms+=("$deb"); else debs+=("$deb"); fi
done
changes=("$packages"/polyhal_*.changes)
if [ ${#debs[@]} -lt 8 ] || [ ${#changes[@]} -ne 1 ]; then
  echo "FAIL: expected 8 .deb files and one .changes in $packages; run 'scripts/debian-packages.sh $packages' first (scripts/test.sh does)"
  exit 1
fi
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source_dir=$(cd "$(dirname "$0")/.." && pwd)
unset POLYHAL_PLUGIN_PATH
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

echo "== lintian"
# Clean: no error, no warning, and no information tag but three, on the
# source and binary packages. hardening-no-fortify-functions is lintian's
# heuristic: it fires on a binary none of whose libc calls has a size the
# compiler knows (the ipu and gaudi models, whose copies are std::vector's);
# the flag itself is checked below, on every object of the packaged
# binaries. initial-upload-closes-no-bugs: these are polyhal's own packages,
# not an upload to Debian with an ITP bug. debian-watch-file-is-missing:
# there is no upstream download site to watch. newer-standards-version:
# debian/control follows Debian 13's policy (4.7.2), which Debian 12's
# lintian does not know yet. spelling-error-in-binary: lintian runs strings
# over the whole executable, and since the launcher has an HTTP server three
# bytes of its machine code (0x77 0x74 0x48: a jump, then a REX prefix) read
# "wtH", which its list knows as "with"; which bytes come out depends on the
# compiler, so no override would hold on both releases.
# package-supports-alternative-init-but-no-init.d-script: polyhal-serve.service
# is the only init integration (Policy 4.6.1 and later asks for no init.d
# script beside a unit, and a model server wants the unit's sandboxing);
# Debian 13's lintian no longer has the tag, and refuses an override or a
# suppression of a tag it does not know, so it is suppressed where it exists.
suppressed=hardening-no-fortify-functions,initial-upload-closes-no-bugs,debian-watch-file-is-missing,newer-standards-version,spelling-error-in-binary
if lintian-explain-tags package-supports-alternative-init-but-no-init.d-script > /dev/null 2>&1; then
  suppressed=$suppressed,package-supports-alternative-init-but-no-init.d-script
fi
lintian --display-info --fail-on error,warning,info --suppress-tags "$suppressed" \
  "${changes[0]}" || fail "lintian reported tags"
objects=("$packages"/polyhal-*/obj-*/build.ninja)
# Packaged from the tested build (debian-packages.sh --from-build): its own.
if [ -f "$packages/packaged-build" ]; then objects=("$(cat "$packages/packaged-build")/build.ninja"); fi
[ ${#objects[@]} -eq 1 ] && [ -f "${objects[0]}" ] ||
  fail "the fortify check reads the package build's build.ninja (dh's cmake+ninja)"
unfortified=$(awk '/^build (core|launcher|plugins|tools)\/[^ ]*\.cpp\.o: CXX_COMPILER/ { object = $2; next }
  object != "" && /^  DEFINES = / { if ($0 !~ /-D_FORTIFY_SOURCE=3/) print object; object = "" }' \
  "${objects[0]}")
[ -z "$unfortified" ] || { echo "$unfortified"; fail "objects built without _FORTIFY_SOURCE=3"; }
fortified=$(grep -c -- "-D_FORTIFY_SOURCE=3" "${objects[0]}")
[ "$fortified" -gt 50 ] || fail "expected the packaged objects' compile lines in build.ninja"

unpack() {  # unpack ROOT DEB...
  local root=$1; shift
  mkdir -p "$root"
  for deb in "$@"; do dpkg-deb -x "$deb" "$root"; done
}
field() { dpkg-deb -f "$1" "$2"; }  # field DEB NAME

echo "== package metadata"
library_deb=("$packages"/libpolyhal0.1_*.deb)
[ -f "${library_deb[0]}" ] || fail "no libpolyhal0.1 package (named by libpolyhal's SONAME)"
polyhal_deb=("$packages"/polyhal_*.deb)
grep -q "libpolyhal0.1 (= " <<<"$(field "${polyhal_deb[0]}" Depends)" ||
  fail "polyhal should depend on libpolyhal0.1 of its own version"
dpkg-deb -e "${library_deb[0]}" "$work/library-control"
grep -q "^libpolyhal.so.0.1 libpolyhal0.1 " "$work/library-control/symbols" ||
  fail "libpolyhal0.1 lacks its symbols file"
grep -qx "activate-noawait ldconfig" "$work/library-control/triggers" || fail "no ldconfig trigger"
[ ! -e "$work/library-control/postinst" ] || fail "ldconfig by trigger: no postinst wanted"
# The release's version: the project's, the changelog's and the packages'.
project_version=$(sed -n 's/^project(polyhal VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
[ "$(field "${polyhal_deb[0]}" Version)" = "$project_version-1" ] ||
  fail "package version $(field "${polyhal_deb[0]}" Version) is not the project's $project_version-1"
[ "$(dpkg-parsechangelog -l "$source_dir/debian/changelog" -S Version)" = "$project_version-1" ] ||
  fail "debian/changelog's version is not the project's $project_version-1"
grep -q "^Homepage: " "$packages"/polyhal_*.dsc && grep -q "^Vcs-Git: " "$packages"/polyhal_*.dsc ||
  fail "the source package lacks Homepage or Vcs-Git"

# (No `| head` or `| grep -q` on a producer's output here: under pipefail
# the producer's SIGPIPE would fail the test at random.)
synopses=$(for deb in "${debs[@]}"; do field "$deb" Description | sed -n 1p; done | sort -u | wc -l)
[ "$synopses" -eq ${#debs[@]} ] || fail "each package needs its own synopsis"
for deb in "${debs[@]}"; do
  name=$(field "$deb" Package)
  case $name in
    polyhal) want=foreign ;;
    polyhal-dev) want=no ;;  # ships a program in /usr/bin
    *) want=same ;;
  esac
  [ "$(field "$deb" Multi-Arch)" = "$want" ] || fail "$name: Multi-Arch '$(field "$deb" Multi-Arch)', expected '$want'"
  contents=$(dpkg-deb -c "$deb")
  grep -q "usr/share/doc/$name/changelog.Debian.gz$" <<<"$contents" ||
    fail "$name lacks its compressed changelog"
  # Every package with a binary has its debug symbols beside it.
  if grep -Eq '\.so[.0-9]*$|usr/bin/' <<<"$contents"; then
    [ -f "$packages/$name-dbgsym_$(field "$deb" Version)_$(field "$deb" Architecture).deb" ] ||
      fail "$name has no -dbgsym package"
  fi
done
[ ${#dbgsyms[@]} -ge 8 ] || fail "expected 8 -dbgsym packages, found ${#dbgsyms[@]}"
grep -q polyhal-plugin-cpu <<<"$(field "${polyhal_deb[0]}" Recommends)" ||
  fail "polyhal should recommend polyhal-plugin-cpu"
# CPU inference (libpolyhal, polyhal, the CPU plugin) needs neither Open MPI
# nor HDF5: they come with the modules' packages.
for deb in "${library_deb[0]}" "${polyhal_deb[0]}" "$packages"/polyhal-plugin-cpu_*.deb; do
  depends=$(dpkg-deb -f "$deb" Depends Recommends)
  ! grep -Eq "openmpi|libhdf5" <<<"$depends" || fail "$(basename "$deb") pulls in MPI or HDF5: $depends"
done
grep -q libopenmpi <<<"$(field "$packages"/polyhal-module-mpi_*.deb Depends)" ||
  fail "polyhal-module-mpi should depend on Open MPI's library"
grep -q openmpi-bin <<<"$(field "$packages"/polyhal-module-mpi_*.deb Suggests)" ||
  fail "polyhal-module-mpi should suggest openmpi-bin (mpirun)"
grep -q libhdf5 <<<"$(field "$packages"/polyhal-module-hdf5_*.deb Depends)" ||
  fail "polyhal-module-hdf5 should depend on libhdf5"

echo "== all packages: the autopkgtests (debian/tests) on the unpacked packages"
unpack "$work/all" "${debs[@]}"
out=$("$work/all/usr/bin/polyhal" plugins)
grep -q "$work/all/usr/lib/$multiarch/polyhal/plugins (install)" <<<"$out" ||
  fail "the multiarch install dir is not searched relative to the executable"
[ -f "$work/all/usr/lib/$multiarch/libpolyhal.so.0.1.0" ] || fail "libpolyhal not in /usr/lib/$multiarch"
for test in run-installed build-a-plugin; do
  mkdir -p "$work/autopkgtest-$test"
  (export POLYHAL_TEST_ROOT=$work/all PATH=$work/all/usr/bin:$PATH CMAKE_PREFIX_PATH=$work/all/usr \
      AUTOPKGTEST_TMP=$work/autopkgtest-$test
   sh "$source_dir/debian/tests/$test") > "$work/$test.log" 2>&1 ||
    { tail -30 "$work/$test.log"; fail "debian/tests/$test on the unpacked packages"; }
done
for shipped in usr/share/doc/polyhal/README.md.gz usr/share/doc/polyhal/docs/config.md.gz \
               usr/share/doc/polyhal-dev/examples/template/CMakeLists.txt \
               usr/share/bash-completion/completions/polyhal usr/share/zsh/vendor-completions/_polyhal \
               usr/share/man/man1/polyhal-op-conformance.1.gz usr/include/polyhal/plugin.hpp \
               "usr/lib/$multiarch/cmake/polyhal/polyhalConfig.cmake"; do
  [ -f "$work/all/$shipped" ] || fail "the packages lack /$shipped"
done

echo "== polyhal serve as a service: the unit and its config"
unit=$(find "$work/all" -path '*/systemd/system/polyhal-serve.service' -print -quit)
[ -n "$unit" ] || fail "the polyhal package lacks polyhal-serve.service"
[ -f "$work/all/etc/polyhal/serve.yaml" ] || fail "the polyhal package lacks /etc/polyhal/serve.yaml"
dpkg-deb -e "${polyhal_deb[0]}" "$work/polyhal-control"
grep -qx /etc/polyhal/serve.yaml "$work/polyhal-control/conffiles" ||
  fail "/etc/polyhal/serve.yaml should be a conffile (a user's edits survive an upgrade)"
# Installed disabled (it needs a model): the scripts start nothing, and
# enable it again only where the admin had enabled it (was-enabled).
postinst=$(cat "$work/polyhal-control/postinst")
! grep -q "deb-systemd-invoke" <<<"$postinst" || fail "the package should not start polyhal-serve"
! grep -q "deb-systemd-helper enable" <<<"$postinst" || grep -q "was-enabled" <<<"$postinst" ||
  fail "polyhal-serve should not be enabled by the package"
# systemd's own check of the unit, with its programs in the unpacked tree.
if command -v systemd-analyze > /dev/null; then
  sed "s|/usr/bin/polyhal|$work/all/usr/bin/polyhal|g" "$unit" > "$work/polyhal-serve.service"
  verify=$(systemd-analyze verify --man=no "$work/polyhal-serve.service" 2>&1) || true
  [ -z "$verify" ] || { echo "$verify"; fail "systemd-analyze verify reports problems in the unit"; }
else
  echo "skipped: systemd-analyze verify (no systemd here)"
fi
set +e
"$work/all/usr/bin/polyhal" serve --check "$work/all/etc/polyhal/serve.yaml" > "$work/serve-check.log" 2>&1
code=$?
set -e
[ $code -eq 2 ] && grep -q "model.dir" "$work/serve-check.log" ||
  { cat "$work/serve-check.log"; fail "serve --check of the shipped config without its model: exit 2 naming model.dir, got $code"; }

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

echo "== CPU inference without the modules (run-installed used the HDF5 module)"
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
grep -q "^onednn-devel >= 3" <<<"$buildrequires" ||
  fail "the spec should build-require oneDNN 3 (onednn-devel >= 3.7), as Fedora ships it"
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
# The %files lists against the installed tree of the package build, as
# rpmbuild -bb would judge them (scripts/rpm-check.sh runs it, a third
# whole build): and a file left out of every list is caught.
installed=("$packages"/polyhal-*/debian/tmp)
python3 "$source_dir/tests/rpm_files_check.py" "$spec" "${installed[0]}" "$multiarch" ||
  fail "the spec's %files lists do not match what is installed"
sed '/vendor-completions/d' "$spec" > "$work/incomplete.spec"
if python3 "$source_dir/tests/rpm_files_check.py" "$work/incomplete.spec" "${installed[0]}" "$multiarch" \
    > "$work/incomplete.log"; then
  fail "a file in no %files list went unnoticed"
fi
grep -q "in no %files list.*_polyhal" "$work/incomplete.log" || fail "the check should name the file"
echo "package test: passed"
