#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <vector>

#include "kernels/reference_gemm.hpp"
#include "polyhal/error.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal {
namespace {

class ReferenceMatMul final : public Kernel {
 public:
  ReferenceMatMul(const KernelDesc& desc, MatMulNumerics numerics)
      : dims_(matmul_dims(desc)),
        in_type_(desc.dtype),
        out_type_(desc.out_dtype()),
        numerics_(numerics) {
    if (!is_floating(in_type_)) {
      throw RuntimeFailure(
          fmt::format("reference matmul needs a floating dtype, got {}", dtype_name(in_type_)));
    }
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    if (inputs.size() != 2 || outputs.size() != 1) {
      throw RuntimeFailure("matmul takes two inputs and one output");
    }
    // Scratch is sized at prepare but allocated on the first run, so a
    // --compile-only plan of a huge workload costs no host memory; later
    // runs reuse it.
    if (c_.empty()) {
      a_.resize(static_cast<std::size_t>(dims_.m * dims_.k));
      b_.resize(static_cast<std::size_t>(dims_.k * dims_.n));
      c_.resize(static_cast<std::size_t>(dims_.m * dims_.n));
    }
    convert(inputs[0].buffer->data(), in_type_, a_.data(), DType::f32, a_.size());
    convert(inputs[1].buffer->data(), in_type_, b_.data(), DType::f32, b_.size());
    detail::reference_gemm(a_.data(), b_.data(), c_.data(), static_cast<std::size_t>(dims_.m),
                           static_cast<std::size_t>(dims_.n), static_cast<std::size_t>(dims_.k),
                           numerics_.accumulate == DType::f16);
    detail::store_rounded(c_.data(), outputs[0].buffer->data(), out_type_, c_.size(), numerics_,
                          runs_++);
  }

  std::string implementation() const override {
    return fmt::format("reference {}->f32 accumulate {} out {}{}", dtype_name(in_type_),
                       dtype_name(numerics_.accumulate), dtype_name(out_type_),
                       numerics_.stochastic_rounding ? " (stochastic rounding)" : "");
  }
  std::uint64_t workspace_bytes() const override {
    return static_cast<std::uint64_t>(dims_.m * dims_.k + dims_.k * dims_.n + dims_.m * dims_.n) *
           sizeof(float);
  }
  double flops() const override {
    return 2.0 * static_cast<double>(dims_.m) * static_cast<double>(dims_.n) *
           static_cast<double>(dims_.k);
  }

 private:
  MatMulDims dims_;
  DType in_type_;
  DType out_type_;
  MatMulNumerics numerics_;
  std::vector<float> a_, b_, c_;
  std::uint64_t runs_ = 0;
};

}  // namespace

namespace detail {

namespace {
/// splitmix64: a counter-based generator, so every output element gets the
/// same random bits whatever the thread schedule.
std::uint32_t random_bits(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<std::uint32_t>((z ^ (z >> 31)) >> 32);
}
}  // namespace

void reference_gemm(const float* a, const float* b, float* c, std::size_t m, std::size_t n,
                    std::size_t k, bool f16_partials) {
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, m), [&](const auto& rows) {
    for (std::size_t i = rows.begin(); i < rows.end(); ++i) {
      float* c_row = c + i * n;
      std::fill(c_row, c_row + n, 0.0f);
      for (std::size_t p = 0; p < k; ++p) {
        const float a_ip = a[i * k + p];
        const float* b_row = b + p * n;
        if (f16_partials) {
          for (std::size_t j = 0; j < n; ++j)
            c_row[j] = round_through(DType::f16, c_row[j] + a_ip * b_row[j]);
        } else {
          for (std::size_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
        }
      }
    }
  });
}

void store_rounded(const float* values, void* dst, DType type, std::size_t count,
                   const MatMulNumerics& numerics, std::uint64_t run) {
  if (numerics.stochastic_rounding && type == DType::f16) {
    auto* out = static_cast<std::uint16_t*>(dst);
    const std::uint64_t seed = numerics.seed ^ (run * 0x100000001b3ull);
    for (std::size_t i = 0; i < count; ++i)
      out[i] = f32_to_f16_bits_stochastic(values[i], random_bits(seed, i));
  } else {
    convert(values, DType::f32, dst, type, count);
  }
}

}  // namespace detail

MatMulDims matmul_dims(const KernelDesc& desc) {
  if (desc.input_shapes.size() != 2 || desc.input_shapes[0].size() != 2 ||
      desc.input_shapes[1].size() != 2 || desc.input_shapes[0][1] != desc.input_shapes[1][0]) {
    throw RuntimeFailure(fmt::format("matmul needs A[M,K] x B[K,N]; got {}", desc.to_string()));
  }
  return {desc.input_shapes[0][0], desc.input_shapes[1][1], desc.input_shapes[0][1]};
}

std::unique_ptr<Kernel> make_reference_matmul(const KernelDesc& desc, MatMulNumerics numerics) {
  return std::make_unique<ReferenceMatMul>(desc, numerics);
}

}  // namespace polyhal
