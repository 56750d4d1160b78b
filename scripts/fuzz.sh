#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz and runs
# each for FUZZ_SECONDS (default 45) on a copy of its seed corpus in
# fuzz/corpus/<target>. A crash, a leak-free sanitizer report or an
# exception that is not polyhal::Error fails the script, leaving the input
# that caused it in build-fuzz/findings/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${POLYHAL_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-45}
mkdir -p "$build"
# FUZZ_OPT (default -O1 -g1, as the sanitized build, scripts/sanitize.sh:
# half the compile time of -O2 -g, symbolized reports with line numbers).
# CI's 5 s per target gives -O0 -g1: 40% less compile time, each input
# slower, the same line numbers.
opt=${FUZZ_OPT:--O1 -g1}
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt -DNDEBUG" \
  -DPOLYHAL_FUZZ=ON -DBUILD_TESTING=OFF -DPOLYHAL_PLUGIN_CPU=OFF -DPOLYHAL_PLUGIN_IPU=OFF \
  -DPOLYHAL_PLUGIN_GAUDI=OFF > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=(config safetensors safetensors_index hf_config tokenizer tokenizer_files tokenizer_json tokenizer_encode tf_checkpoint tfrecord squad_json glue_tsv mlperf_hdf5 plugin_file int8_scales recipe metrics serve_request)
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"
mkdir -p "$build/findings"
# Leaks in the libraries' one-time initialisation (ICU, yaml-cpp) are not
# findings; memory errors and undefined behaviour are.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  cp -n "$root/fuzz/corpus/$target/"* "$corpus/"
  echo "fuzz_$target: ${seconds} s"
  "$build/fuzz/fuzz_$target" "$corpus" -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=2048 -timeout=20 -artifact_prefix="$build/findings/$target-" \
    -print_final_stats=1 2> "$build/fuzz_$target.log" ||
    { tail -50 "$build/fuzz_$target.log"; echo "fuzz_$target found a problem: $build/findings"; exit 1; }
  grep -E "stat::number_of_executed_units|cov:" "$build/fuzz_$target.log" | tail -2
done
