#pragma once
/// @file matmul_bench.hpp
/// The `matmul-bench` task: prepare one matmul per shape once, run it many
/// times, report GFLOP/s. On real devices the figure is measured; on device
/// models it is the model's estimate, and the host simulation time is
/// reported separately so nobody mistakes it for device speed.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/device.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal {

/// Config section `matmul_bench` (core/src/tasks/matmul_bench/matmul_bench_section.cpp).
struct MatmulBenchConfig {
  static constexpr const char* kSection = "matmul_bench";
  std::vector<std::array<std::int64_t, 3>> shapes;  ///< {M, N, K}
  DType dtype = DType::f32;
  std::optional<DType> out_dtype;  ///< default: dtype
  int iterations = 20;
  int warmup = 2;
};

struct MatmulShapeResult {
  std::array<std::int64_t, 3> mnk{};  ///< M, N, K
  std::string implementation;         ///< which kernel ran
  MemoryReport memory;
  double flops_per_run = 0.0;
  /// Wall time per run on this host; for a device model this is simulation time.
  std::optional<double> host_seconds_per_run;
  /// Device-model estimate per run (nullopt on real hardware).
  std::optional<double> estimated_seconds_per_run;
  /// Measured GFLOP/s on real hardware, estimated GFLOP/s on a model.
  std::optional<double> gflops() const;
};

/// Runs (or with `compile_only`, only prepares and plans) the benchmark.
/// Throws KernelNotFoundError at prepare time if the device lacks the kernel.
std::vector<MatmulShapeResult> run_matmul_bench(Device& device, const MatmulBenchConfig& config,
                                                bool compile_only);

}  // namespace polyhal
