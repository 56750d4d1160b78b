#!/usr/bin/env bash
# The plugin contract stands apart: a plugin (compiled as polyhal_add_plugin
# compiles it, with POLYHAL_BUILDING_PLUGIN) builds against every contract
# header, and fails to build, with a message that says why, when it
# includes an application header (polyhal/app/).
#   plugin_contract_test.sh SOURCE_DIR CXX
set -euo pipefail
src=$1
cxx=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
compile() { "$cxx" -std=c++20 -fsyntax-only -DPOLYHAL_BUILDING_PLUGIN -I "$src/core/include" "$1"; }

for header in "$src"/core/include/polyhal/*.hpp; do
  echo "#include \"polyhal/$(basename "$header")\"" >> "$work/contract.cpp"
done
compile "$work/contract.cpp" || fail "a plugin cannot build against the contract headers"

count=0
for header in "$src"/core/include/polyhal/app/*.hpp; do
  name=$(basename "$header")
  echo "#include \"polyhal/app/$name\"" > "$work/app.cpp"
  if compile "$work/app.cpp" > "$work/out.txt" 2>&1; then
    fail "a plugin including polyhal/app/$name builds"
  fi
  grep -q "polyhal/app/ headers are not the plugin contract" "$work/out.txt" ||
    { cat "$work/out.txt"; fail "polyhal/app/$name fails in a plugin without saying why"; }
  count=$((count + 1))
done
echo "ok: the contract builds in a plugin; each of $count application headers refuses to"
