#!/usr/bin/env bash
# Plugin authors' path: install polyhal (runtime + dev) into a prefix, build
# plugins/template against it with find_package(polyhal), load it with the
# installed launcher and run a matmul on it.
set -euo pipefail
source_dir=${1:?usage: out_of_tree_plugin_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for component in runtime dev; do
  cmake --install "$build" --prefix "$work/prefix" --component "$component" > /dev/null
done
cmake -S "$source_dir/plugins/template" -B "$work/template-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; fail "configure against the installed polyhal-dev"; }
cmake --build "$work/template-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
plugin=$work/template-build/libpolyhal_plugin_template.so
[ -f "$plugin" ] || fail "no $plugin"
out=$("$work/prefix/bin/polyhal" plugins --plugin-path "$work/template-build")
echo "$out"
grep -q "template .* loaded" <<<"$out" || fail "template plugin not loaded"
cat > "$work/template.yaml" <<YAML
backend: template
device: {memory_mib: 1}
task: matmul-bench
matmul_bench: {shapes: [[64, 64, 64]], iterations: 2}
YAML
"$work/prefix/bin/polyhal" run --plugin-path "$work/template-build" --config "$work/template.yaml" \
  || fail "run on the template backend"
set +e
"$work/prefix/bin/polyhal" run --plugin-path "$work/template-build" --config "$work/template.yaml" \
  --set 'matmul_bench.shapes=[[1024, 1024, 1024]]' > "$work/oom.log" 2>&1
code=$?
set -e
cat "$work/oom.log"
[ $code -eq 1 ] || fail "allocation past the template's 1 MiB should exit 1, got $code"
grep -q "template0: cannot allocate" "$work/oom.log" || fail "out-of-memory message should name the device"
echo "out-of-tree plugin test: passed"
