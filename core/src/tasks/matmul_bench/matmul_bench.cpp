#include "polyhal/app/matmul_bench.hpp"
#include "polyhal/app/tensor_limit.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>

namespace polyhal {

std::optional<double> MatmulShapeResult::gflops() const {
  const auto seconds = estimated_seconds_per_run ? estimated_seconds_per_run : host_seconds_per_run;
  if (!seconds || *seconds <= 0.0) return std::nullopt;
  return flops_per_run / *seconds / 1e9;
}

namespace {

void fill_random(Device& device, const Tensor& tensor, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(tensor.numel()));
  for (auto& v : values) v = uniform(generator);
  std::vector<std::byte> converted(tensor.bytes());
  convert(values.data(), DType::f32, converted.data(), tensor.dtype, values.size());
  device.copy_from_host(*tensor.buffer, converted.data(), converted.size());
}

}  // namespace

std::vector<MatmulShapeResult> run_matmul_bench(Device& device, const MatmulBenchConfig& config,
                                                bool compile_only) {
  const DType out_type = config.out_dtype.value_or(config.dtype);
  std::vector<MatmulShapeResult> results;
  for (const auto& [m, n, k] : config.shapes) {
    KernelDesc desc{OpKind::matmul, config.dtype, {{m, k}, {k, n}}, MatmulAttrs{out_type}};
    MatmulShapeResult result;
    result.mnk = {m, n, k};
    // The task bounds them (naming the key); a caller of this function may not have.
    if (device.properties().mode != DeviceMode::model) {
      check_tensor_size("A", desc.input_shapes[0]);
      check_tensor_size("B", desc.input_shapes[1]);
      check_tensor_size("C", std::array<std::int64_t, 2>{m, n});
    }
    auto kernel = device.prepare_kernel(desc);
    result.implementation = kernel->implementation();
    result.flops_per_run = kernel->flops();
    result.estimated_seconds_per_run = device.estimate_seconds(desc);
    const auto in_bytes = static_cast<std::uint64_t>(dtype_size(config.dtype));
    result.memory = device.plan_memory({
        {"inputs", "A", static_cast<std::uint64_t>(m * k) * in_bytes},
        {"weights", "B", static_cast<std::uint64_t>(k * n) * in_bytes},
        {"activations", "C", static_cast<std::uint64_t>(m * n) * dtype_size(out_type)},
        {"workspace", "kernel scratch", kernel->workspace_bytes()},
    });
    if (!compile_only) {
      Tensor a = device.allocate_tensor(config.dtype, {m, k}, "matmul A");
      Tensor b = device.allocate_tensor(config.dtype, {k, n}, "matmul B");
      Tensor c = device.allocate_tensor(out_type, {m, n}, "matmul C");
      fill_random(device, a, 1);
      fill_random(device, b, 2);
      const std::array inputs{a, b};
      const std::array outputs{c};
      for (int i = 0; i < config.warmup; ++i) kernel->run(inputs, outputs);
      device.synchronize();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < config.iterations; ++i) kernel->run(inputs, outputs);
      device.synchronize();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      result.host_seconds_per_run = elapsed.count() / config.iterations;
      spdlog::debug("matmul {}x{}x{}: {} runs in {:.4f} s", m, n, k, config.iterations,
                    elapsed.count());
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace polyhal
