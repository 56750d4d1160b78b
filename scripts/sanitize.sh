#!/usr/bin/env bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer
# (gcc) into build-asan and runs the unit, kernel and launcher tests there.
# Left out (serial_tests in scripts/ctest-groups.sh): the package and ABI symbol tests (they check the packages and the
# normal build's library), the
# formatting check (the normal run has them), and the end-to-end learning
# runs of tasks squad and glue (minutes each even unsanitized; their code is
# exercised by the golden and packed tests), and the real-model comparisons
# (thousands of sentences; the inference code is the golden tests'), and the multi-host
# runs between network namespaces (the MPI code is mpi_test's), the HTML report
# screenshots (headless Chromium is most of their time; the metrics reader
# still runs sanitized in HtmlReportInput and fuzz_metrics), and the IPU and Gaudi op
# conformance sweeps (the same reference kernels the CPU sweep runs
# sanitized, 2.6 min more), and five long computations that read no input
# (the exhaustive bf16 rounding check, the NNLSHP packing solver against its
# reference, the kill-and-resume trajectory, the Gaudi bf16 training run and
# three trainings through a plugin's collective engine: about 5 min of the
# sanitized run; their code paths are in shorter tests that do run here). Leak checking is off: the
# libraries' one-time initialisation (Open MPI, ICU) holds memory until exit.
# -O1 -g1 (as the ASan documentation suggests) halves the compile time of
# -O2 -g and still gives symbolized stack traces with line numbers. The
# benchmarks are not built: no test runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/ctest-groups.sh
source "$root/scripts/ctest-groups.sh"
build=${POLYHAL_ASAN_BUILD_DIR:-$root/build-asan}
mkdir -p "$build"
cmake -S "$root" -G Ninja -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPOLYHAL_SANITIZE=ON -DPOLYHAL_BENCH=OFF \
  > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --parallel "$(nproc)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build"
ctest --output-on-failure --timeout 1800 -j "$(nproc)" \
  -E "$serial_tests" "$@"
