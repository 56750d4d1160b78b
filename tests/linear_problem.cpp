#include "linear_problem.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "polyhal/int8.hpp"
#include "polyhal/reference_kernels.hpp"
#include "test_support.hpp"

namespace polyhal::test {

/// X with a few outlier columns, as BERT's LayerNorm outputs have.
LinearProblem make_problem(DType type, std::int64_t m, std::int64_t k, std::int64_t n) {
  LinearProblem p;
  p.m = m;
  p.k = k;
  p.n = n;
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.x.resize(static_cast<std::size_t>(p.m * p.k));
  for (std::size_t i = 0; i < p.x.size(); ++i) {
    const bool outlier = i % static_cast<std::size_t>(p.k) % 31 == 3;
    p.x[i] = round_through(type, normal(generator) * (outlier ? 20.0f : 1.0f));
  }
  p.w.resize(static_cast<std::size_t>(p.n * p.k));
  for (auto& v : p.w) v = round_through(type, 0.05f * normal(generator));
  p.b.resize(static_cast<std::size_t>(p.n));
  for (auto& v : p.b) v = 0.1f * normal(generator);
  p.r.resize(static_cast<std::size_t>(p.m * p.n));
  for (auto& v : p.r) v = round_through(type, normal(generator));
  for (const float v : p.x) p.x_max = std::max(p.x_max, std::fabs(v));
  return p;
}

Tensor upload(Device& device, DType type, const Shape& shape, const std::vector<float>& values) {
  Tensor t = device.allocate_tensor(type, shape, "test");
  std::vector<std::byte> staging(t.bytes());
  convert(values.data(), DType::f32, staging.data(), type, values.size());
  device.copy_from_host(*t.buffer, staging.data(), t.bytes());
  return t;
}

/// Runs linear(X) + gelu + residual with `math` on `kernel` (smoothed by
/// `smoothing`, int8.hpp, when given).
std::vector<float> run_linear(Device& device, Kernel& kernel, const LinearProblem& p, DType type,
                              const std::vector<float>* smoothing) {
  std::vector<Tensor> constants{upload(device, type, {p.n, p.k}, p.w),
                                upload(device, DType::f32, {p.n}, p.b)};
  if (smoothing != nullptr) constants.push_back(upload(device, DType::f32, {p.k}, *smoothing));
  kernel.set_constants(constants);
  const std::array inputs{upload(device, type, {p.m, p.k}, p.x),
                          upload(device, type, {p.m, p.n}, p.r)};
  const std::array outputs{device.allocate_tensor(type, {p.m, p.n}, "Y")};
  kernel.run(inputs, outputs);
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n));
  convert(outputs[0].buffer->data(), type, y.data(), DType::f32, y.size());
  return y;
}

/// The portable reference kernel for `desc` (reference_kernels.hpp).
std::unique_ptr<Kernel> reference_kernel(const KernelDesc& desc, Device& device) {
  KernelRegistry registry;
  register_reference_kernels(registry, {DType::f32, DType::bf16}, MatMulNumerics{});
  return (*registry.find(desc.op, desc.dtype))(desc, device);
}

/// `input_scale` 0: int8 quantises X per row (dynamic); `input` gelu: X is
/// a GELU output (u8 after the shift).
KernelDesc linear_desc(const LinearProblem& p, DType type, LinearMath math, float input_scale,
                       Activation input) {
  return {OpKind::linear,
          type,
          {{p.m, p.k}},
          LinearAttrs{p.n, Activation::gelu, true, math, input, input_scale}};
}

/// The problem's X replaced by GELU outputs (>= -0.17), as FFN-down reads.
LinearProblem gelu_input(LinearProblem p, DType type) {
  for (float& v : p.x)
    v = round_through(type, static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))));
  return p;
}

double gelu(double v) {
  return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
}

/// The int8 rule computed here in double: quantise as int8.hpp says (one
/// step, or one per row when `input_scale` is 0, u8 after the shift for a
/// GELU input), sum the integer products, dequantise, bias, GELU, residual.
std::vector<double> int8_expected(const LinearProblem& p, float input_scale, bool gelu_input,
                                  float weight_max) {
  std::vector<std::int8_t> w(p.w.size());
  std::vector<float> w_step(static_cast<std::size_t>(p.n));
  quantize_weights_per_channel(p.w, p.n, p.k, w, w_step, weight_max);
  std::vector<double> y(static_cast<std::size_t>(p.m * p.n));
  std::vector<std::int8_t> x(static_cast<std::size_t>(p.k));
  std::vector<std::uint8_t> u(static_cast<std::size_t>(p.k));
  for (std::int64_t i = 0; i < p.m; ++i) {
    const std::span<const float> row(p.x.data() + i * p.k, static_cast<std::size_t>(p.k));
    double step = input_scale;
    if (input_scale > 0.0f) {
      for (std::int64_t q = 0; q < p.k; ++q) x[q] = quantize_s8(row[q], 1.0f / input_scale);
    } else if (gelu_input) {
      step = quantize_gelu_row_u8(row, u);
    } else {
      step = quantize_row_s8(row, x);
    }
    for (std::int64_t j = 0; j < p.n; ++j) {
      std::int64_t acc = 0, weights = 0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        acc += (gelu_input ? std::int64_t{u[q]} : std::int64_t{x[q]}) * w[j * p.k + q];
        weights += w[j * p.k + q];
      }
      // The shift's share: kGeluShift times the dequantised weights' sum.
      const double shift =
          gelu_input ? double{kGeluShift} * w_step[j] * static_cast<double>(weights) : 0.0;
      const double v = static_cast<double>(acc) * step * w_step[j] + p.b[j] - shift;
      y[i * p.n + j] = gelu(v) + p.r[i * p.n + j];
    }
  }
  return y;
}

std::vector<double> cpu_int8_want(Device& cpu, const KernelDesc& desc, const LinearProblem& p,
                                  DType type, const std::vector<float>* smoothing) {
  if (cpu_int8_weight_max() == kInt8Max) {
    const auto want = run_linear(cpu, *reference_kernel(desc, cpu), p, type, smoothing);
    return {want.begin(), want.end()};
  }
  // Smoothing is X / s and W * s, quantised as usual (int8.hpp).
  LinearProblem moved = p;
  if (smoothing != nullptr) {
    const std::vector<float>& s = *smoothing;
    for (std::size_t i = 0; i < moved.x.size(); ++i) moved.x[i] *= 1.0f / s[i % s.size()];
    for (std::size_t i = 0; i < moved.w.size(); ++i) moved.w[i] *= s[i % s.size()];
  }
  const auto& attrs = desc.attrs_as<LinearAttrs>();
  return int8_expected(moved, attrs.input_scale, attrs.input_activation == Activation::gelu,
                       kInt7Max);
}

std::vector<double> f32_expected(const LinearProblem& p) {
  std::vector<double> y(static_cast<std::size_t>(p.m * p.n));
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (std::int64_t q = 0; q < p.k; ++q)
        acc += static_cast<double>(p.x[i * p.k + q]) * p.w[j * p.k + q];
      y[i * p.n + j] = gelu(acc + p.b[j]) + p.r[i * p.n + j];
    }
  }
  return y;
}

double max_difference(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  return worst;
}

/// Products of f32 tensors in `narrow` (bf32, f16): the reference rounds X
/// and W to `narrow` and sums in f32, and so must the CPU kernel, within
/// `tolerance`; the result differs from f32 products by more than
/// `differs`. Returns the CPU kernel's implementation.
std::string expect_narrow_products(Device& cpu, LinearMath math, DType narrow, double tolerance,
                                   double differs) {
  const LinearProblem p = make_problem(DType::f32);
  const auto desc = linear_desc(p, DType::f32, math);
  auto kernel = cpu.prepare_kernel(desc);
  const auto got = run_linear(cpu, *kernel, p, DType::f32);
  const auto want = run_linear(cpu, *reference_kernel(desc, cpu), p, DType::f32);
  LinearProblem rounded = p;
  for (auto& v : rounded.x) v = round_through(narrow, v);
  for (auto& v : rounded.w) v = round_through(narrow, v);
  EXPECT_LE(max_difference(want, f32_expected(rounded)), tolerance);
  EXPECT_LE(max_difference(got, f32_expected(rounded)), tolerance) << kernel->implementation();
  EXPECT_GT(max_difference(got, f32_expected(p)), differs)
      << dtype_name(narrow) << " products differ from f32 ones";
  return kernel->implementation();
}
}  // namespace polyhal::test
