#!/usr/bin/env bash
# Plugin authors' path (docs/plugin-authors.md): install polyhal (runtime +
# dev) into a prefix, copy the template the dev package ships, build it with
# find_package(polyhal) from that prefix alone, load it with the installed
# launcher, run a matmul and BERT inference on it.
set -euo pipefail
source_dir=${1:?usage: out_of_tree_plugin_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for component in library runtime dev; do
  cmake --install "$build" --prefix "$work/prefix" --component "$component" > /dev/null
done
template=$work/prefix/share/doc/polyhal-dev/examples/template
[ -f "$template/CMakeLists.txt" ] || fail "polyhal-dev does not ship the template at $template"
cp -r "$template" "$work/my-plugin"
cmake -S "$work/my-plugin" -B "$work/template-build" -G Ninja \
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
cat > "$work/bert.yaml" <<YAML
backend: template
task: inference
model: {preset: tiny, seq_len: 16, precision: f32}
batch: {micro: 2}
inference: {iterations: 2, warmup: 1}
YAML
"$work/prefix/bin/polyhal" run "$work/bert.yaml" --plugin-path "$work/template-build" \
  > "$work/bert.log" 2>&1 || { cat "$work/bert.log"; fail "BERT inference on the template backend"; }
grep -q "measured: " "$work/bert.log" || { cat "$work/bert.log"; fail "no measurement from BERT"; }
# polyhal-dev's conformance check on the plugin file just built.
"$work/prefix/bin/polyhal-op-conformance" "$plugin" --quick > "$work/conformance.log" 2>&1 ||
  { tail -30 "$work/conformance.log"; fail "polyhal-op-conformance on the template plugin"; }
grep -q "^template: [1-9][0-9]* ok, 0 failed" "$work/conformance.log" ||
  { tail -5 "$work/conformance.log"; fail "polyhal-op-conformance should pass the template's kernels"; }
set +e
"$work/prefix/bin/polyhal" run --plugin-path "$work/template-build" --config "$work/template.yaml" \
  --set 'matmul_bench.shapes=[[1024, 1024, 1024]]' > "$work/oom.log" 2>&1
code=$?
set -e
cat "$work/oom.log"
[ $code -eq 1 ] || fail "allocation past the template's 1 MiB should exit 1, got $code"
grep -q "template0: cannot allocate" "$work/oom.log" || fail "out-of-memory message should name the device"
# Renamed in its one place and installed into a prefix's plugin directory.
sed -i 's/set(PLUGIN_NAME template)/set(PLUGIN_NAME myaccel)/' "$work/my-plugin/CMakeLists.txt"
cmake -S "$work/my-plugin" -B "$work/renamed-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" > "$work/configure2.log" 2>&1 ||
  { cat "$work/configure2.log"; fail "configure the renamed plugin"; }
cmake --build "$work/renamed-build" > /dev/null && cmake --install "$work/renamed-build" > /dev/null ||
  fail "build and install the renamed plugin"
out=$("$work/prefix/bin/polyhal" plugins)
grep -q "myaccel .* loaded .*$work/prefix/lib/.*polyhal/plugins/libpolyhal_plugin_myaccel.so" <<<"$out" ||
  { echo "$out"; fail "the renamed plugin, installed, should load without --plugin-path"; }
echo "out-of-tree plugin test: passed"
