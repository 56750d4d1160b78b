// Task `matmul-bench`: GEMMs at given shapes, measured or estimated.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <array>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "matmul_bench_section.hpp"
#include "polyhal/app/matmul_bench.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/app/tensor_limit.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// On hardware, every operand and product under the kernels' limit
/// (tensor_limit.hpp), refused naming the shape's key; a device model plans
/// any size and says whether it fits.
void check_shapes(const Device& device, const RunConfig& config) {
  const DType dtype = config.section<MatmulBenchConfig>().dtype;
  if (!device.supports(dtype)) {
    std::vector<std::string> has;
    for (const DType t : device.properties().dtypes) has.emplace_back(dtype_name(t));
    config.fail("matmul_bench.dtype",
                fmt::format("{} does not compute in {}; it has {}", device.name(),
                            dtype_name(dtype), fmt::join(has, ", ")));
  }
  if (device.properties().mode == DeviceMode::model) return;
  const auto& shapes = config.section<MatmulBenchConfig>().shapes;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [m, n, k] = shapes[i];
    for (const auto& [operand, rows, columns] :
         {std::tuple{"A", m, k}, std::tuple{"B", k, n}, std::tuple{"C", m, n}}) {
      const std::array<std::int64_t, 2> dims{rows, columns};
      if (bounded_element_count(dims) < 0)
        config.fail(fmt::format("matmul_bench.shapes[{}]", i),
                    fmt::format("{} [{}, {}] would hold more than {} elements, the most one "
                                "kernel indexes (oneDNN uses 32-bit offsets)",
                                operand, rows, columns, kMaxTensorElements));
    }
  }
}

int run_matmul(Device& device, const RunConfig& config, const RunOptions& run,
               MetricsWriter& metrics) {
  check_shapes(device, config);
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const auto results =
      run_matmul_bench(device, config.section<MatmulBenchConfig>(), run.compile_only);
  std::cout << fmt::format("matmul-bench on {} ({}{}), dtype {}\n", p.name, p.product,
                           model ? ", device model" : "",
                           dtype_name(config.section<MatmulBenchConfig>().dtype));
  bool all_fit = true;
  double best = 0.0;
  for (const auto& r : results) {
    const auto [m, n, k] = r.mnk;
    std::cout << fmt::format("M={} N={} K={}  kernel: {}\n", m, n, k, r.implementation);
    print_memory(r.memory);
    all_fit = all_fit && r.memory.fits;
    nlohmann::json record{{"event", "matmul"},
                          {"m", m},
                          {"n", n},
                          {"k", k},
                          {"implementation", r.implementation},
                          {"fits", r.memory.fits},
                          {"memory_required_bytes", r.memory.required_bytes}};
    if (r.host_seconds_per_run) {
      const double host_gflops = r.flops_per_run / *r.host_seconds_per_run / 1e9;
      record["host_seconds_per_run"] = *r.host_seconds_per_run;
      if (model) {
        record["host_simulation_gflops"] = host_gflops;
        std::cout << fmt::format(
            "  host simulation: {:.3f} ms/run ({:.2f} GFLOP/s on this host, not the device)\n",
            *r.host_seconds_per_run * 1e3, host_gflops);
      } else {
        record["gflops"] = host_gflops;
        best = std::max(best, host_gflops);
        std::cout << fmt::format("  measured: {:.3f} ms/run, {:.2f} GFLOP/s\n",
                                 *r.host_seconds_per_run * 1e3, host_gflops);
      }
    }
    if (r.estimated_seconds_per_run) {
      const double estimated = r.flops_per_run / *r.estimated_seconds_per_run / 1e9;
      record["estimated_gflops"] = estimated;
      best = std::max(best, estimated);
      std::cout << fmt::format(
          "  estimated (device model, not measured): {:.4f} ms/run, {:.1f} GFLOP/s\n",
          *r.estimated_seconds_per_run * 1e3, estimated);
    }
    metrics.write(record);
  }
  nlohmann::json summary{
      {"backend", config.backend},
      {"device", p.name},
      {"product", p.product},
      {"mode", std::string(device_mode_name(p.mode))},
      {"task", config.task},
      {"model", "matmul"},
      {"precision", std::string(dtype_name(config.section<MatmulBenchConfig>().dtype))},
      {"compile_only", run.compile_only},
      {"fits", all_fit}};
  if (!run.compile_only) summary[model ? "estimated_gflops" : "gflops"] = best;
  metrics.write_summary(summary);
  if (run.compile_only && !all_fit) return static_cast<int>(ExitCode::failure);
  return 0;
}

class MatmulBenchTask final : public Task {
 public:
  const TaskSchema& schema() const override { return matmul_bench_schema(); }
  PlanSummary plan(const TaskContext& context) const override {
    Device& device = context.device;
    const RunConfig& config = context.config;
    check_shapes(device, config);
    bool fits = true;
    for (const auto& r : run_matmul_bench(device, config.section<MatmulBenchConfig>(), true))
      fits = fits && r.memory.fits;
    return {fits ? "every shape fits" : "a shape does not fit", fits};
  }
  int run(const TaskContext& context) const override {
    const RunOptions& run = context.options;
    const RunConfig& config = context.config;
    if (run.profile || !run.report_dir.empty())
      spdlog::warn(
          "task {} times GEMM shapes alone: --profile and --report apply to inference "
          "and training tasks; its per-shape table is the report",
          config.task);
    return run_matmul(context.device, config, run, context.metrics);
  }
};

}  // namespace

std::unique_ptr<Task> make_matmul_bench_task() {
  return std::make_unique<MatmulBenchTask>();
}

}  // namespace polyhal
