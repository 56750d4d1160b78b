#pragma once
// Linear layers (LinearAttrs) as the numerics tests pose them: a problem
// with BERT-like outlier columns, the kernel run on a device, the portable
// reference kernel, and the int8 and f32 results computed here in double.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/device.hpp"
#include "polyhal/int8.hpp"
#include "polyhal/op_schema.hpp"

namespace polyhal::test {

struct LinearProblem {
  std::int64_t m = 37, k = 96, n = 70;  // odd rows catch tails
  std::vector<float> x, w, b, r;
  float x_max = 0.0f;  ///< largest |x|: the static step's calibration
};

/// X with a few outlier columns, as BERT's LayerNorm outputs have; X is
/// [m, k] and W [n, k].
LinearProblem make_problem(DType type, std::int64_t m = 37, std::int64_t k = 96,
                           std::int64_t n = 70);
Tensor upload(Device& device, DType type, const Shape& shape, const std::vector<float>& values);
/// Runs linear(X) + gelu + residual on `kernel` (smoothed by `smoothing`,
/// int8.hpp, when given).
std::vector<float> run_linear(Device& device, Kernel& kernel, const LinearProblem& p, DType type,
                              const std::vector<float>* smoothing = nullptr);
/// The portable reference kernel for `desc` (reference_kernels.hpp).
std::unique_ptr<Kernel> reference_kernel(const KernelDesc& desc, Device& device);
/// `input_scale` 0: int8 quantises X per row (dynamic); `input` gelu: X is
/// a GELU output (u8 after the shift).
KernelDesc linear_desc(const LinearProblem& p, DType type, LinearMath math,
                       float input_scale = 0.0f, Activation input = Activation::none);
/// The problem's X replaced by GELU outputs (>= -0.17), as FFN-down reads.
LinearProblem gelu_input(LinearProblem p, DType type);
double gelu(double v);
/// The int8 rule computed here in double: quantise as int8.hpp says (one
/// step, or one per row when `input_scale` is 0, u8 after the shift for a
/// GELU input; W to `weight_max`), sum the integer products, dequantise,
/// bias, GELU, residual.
std::vector<double> int8_expected(const LinearProblem& p, float input_scale,
                                  bool gelu_input = false, float weight_max = kInt8Max);
/// What the CPU plugin's int8 linear must compute for `desc` on this host:
/// the reference kernel's result where it keeps eight-bit weights, the rule
/// in double with seven-bit weights where the CPU has no VNNI (int8.hpp).
std::vector<double> cpu_int8_want(Device& cpu, const KernelDesc& desc, const LinearProblem& p,
                                  DType type, const std::vector<float>* smoothing = nullptr);
std::vector<double> f32_expected(const LinearProblem& p);
double max_difference(const std::vector<float>& got, const std::vector<double>& want);
/// Products of f32 tensors in `narrow` (bf32, f16): the reference rounds X
/// and W to `narrow` and sums in f32, and so must the device's kernel, within
/// `tolerance`; the result differs from f32 products by more than
/// `differs`. Returns the kernel's implementation.
std::string expect_narrow_products(Device& cpu, LinearMath math, DType narrow, double tolerance,
                                   double differs);

}  // namespace polyhal::test
