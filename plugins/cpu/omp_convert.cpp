#include "omp_convert.hpp"

#include <cstring>

#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

class OmpCast final : public Kernel {
 public:
  explicit OmpCast(const KernelDesc& desc)
      : desc_(desc), types_(operand_types(desc)), count_(element_count(desc.input_shapes.at(0))) {}
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    if (out[0].dtype == DType::bf16) {
      to_bf16(in[0].data<float>(), out[0].data<std::uint16_t>(), count_);
    } else {
      std::memcpy(out[0].buffer->data(), in[0].buffer->data(), in[0].bytes());
    }
  }
  std::string implementation() const override { return "omp cast"; }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t count_;
};

}  // namespace

std::unique_ptr<Kernel> make_omp_cast(const KernelDesc& desc) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OmpCast>(desc);
}

void to_bf16(const float* src, std::uint16_t* dst, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = detail::bf16_bits_inline(src[i]);
}

void round_to_bf16(float* values, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) values[i] = detail::round_bf16_inline(values[i]);
}

}  // namespace polyhal::cpu
