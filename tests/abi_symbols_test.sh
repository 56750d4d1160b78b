#!/usr/bin/env bash
# libpolyhal's ABI against debian/libpolyhal0.1.symbols, checked as the
# next version's package build checks it (dpkg-gensymbols -c1 judges symbols
# of the version being built as still free to change, so the check is made
# as a later version): every symbol the file lists as polyhal's ABI is still
# exported by the built library. And the check can fail: a listed symbol the
# library does not export is reported as disappeared.
#   abi_symbols_test.sh LIBPOLYHAL.so.X.Y.Z SOURCE_DIR
set -euo pipefail
library=$(realpath "${1:?usage: abi_symbols_test.sh LIBPOLYHAL SOURCE_DIR}")
source_dir=${2:?usage: abi_symbols_test.sh LIBPOLYHAL SOURCE_DIR}
command -v dpkg-gensymbols > /dev/null || { echo "skipped: needs dpkg-gensymbols (dpkg-dev)"; exit 77; }
symbols=$source_dir/debian/libpolyhal0.1.symbols
version=$(dpkg-parsechangelog -l "$source_dir/debian/changelog" -S Version)
next=${version%-*}+next
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg 1.22 (Debian 13) reads the package's debian/control from where it runs.
mkdir -p "$work/debian"
cp "$source_dir/debian/control" "$source_dir/debian/changelog" "$work/debian/"
fail() { echo "FAIL: $*"; exit 1; }
check() {  # check SYMBOLS_FILE LOG
  (cd "$work" && dpkg-gensymbols -v"$next" -plibpolyhal0.1 -e"$library" -I"$1" -O"$work/out.symbols" -c1) \
    > "$2" 2>&1
}

check "$symbols" "$work/abi.log" || {
  cat "$work/abi.log"
  fail "libpolyhal no longer exports a symbol of its ABI (above, '-' lines). If the break is" \
    "deliberate, run scripts/update_symbols.py $library and bump the version (docs/packaging.md)"
}
echo "libpolyhal exports every symbol of debian/libpolyhal0.1.symbols"

# A symbol the file lists and the library lacks: what a removed function looks like.
cp "$symbols" "$work/broken.symbols"
echo ' (c++)"polyhal::abi_symbols_test_removed_function()@Base" 0.1.0' >> "$work/broken.symbols"
if check "$work/broken.symbols" "$work/broken.log"; then
  cat "$work/broken.log"
  fail "a symbol missing from the library went unnoticed"
fi
grep -q "disappeared" "$work/broken.log" || { cat "$work/broken.log"; fail "expected 'symbols disappeared'"; }
grep -q "abi_symbols_test_removed_function" "$work/broken.log" || fail "the report should name the symbol"
echo "a missing symbol fails the check, by name"
