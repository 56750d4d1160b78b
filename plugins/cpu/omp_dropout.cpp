#include "omp_dropout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <string>

#include "omp_convert.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

// The loop, inlined into each ISA's copy below. The mask's parts live in
// locals: read through the reference, any store to y might change them,
// which stops vectorisation.
template <bool RoundToBf16>
[[gnu::always_inline]] inline void dropout_loop(const DropoutMask& mask, std::uint64_t first,
                                                const float* x, float* y, std::int64_t count) {
  const std::uint64_t key = mask.key(), threshold = mask.threshold();
  const float keep = mask.keep();
#pragma omp simd
  for (std::int64_t k = 0; k < count; ++k) {
    const auto i = first + static_cast<std::uint64_t>(k);
    const float v = x[k] * (DropoutMask::bits(key, i) < threshold ? 0.0f : keep);
    y[k] = RoundToBf16 ? detail::round_bf16_inline(v) : v;
  }
}

/// The same on bf16 storage: widen, multiply, round to nearest even.
[[gnu::always_inline]] inline void dropout_loop_bf16(const DropoutMask& mask, std::uint64_t first,
                                                     const std::uint16_t* x, std::uint16_t* y,
                                                     std::int64_t count) {
  const std::uint64_t key = mask.key(), threshold = mask.threshold();
  const float keep = mask.keep();
#pragma omp simd
  for (std::int64_t k = 0; k < count; ++k) {
    const auto i = first + static_cast<std::uint64_t>(k);
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(x[k]) << 16) *
                    (DropoutMask::bits(key, i) < threshold ? 0.0f : keep);
    y[k] = detail::bf16_bits_inline(v);
  }
}

void apply_portable_bf16(const DropoutMask& mask, std::uint64_t first, const std::uint16_t* x,
                         std::uint16_t* y, std::int64_t count) {
  dropout_loop_bf16(mask, first, x, y, count);
}

__attribute__((target("avx512f,avx512dq"))) void apply_avx512_bf16(const DropoutMask& mask,
                                                                   std::uint64_t first,
                                                                   const std::uint16_t* x,
                                                                   std::uint16_t* y,
                                                                   std::int64_t count) {
  dropout_loop_bf16(mask, first, x, y, count);
}

void apply_portable(const DropoutMask& mask, std::uint64_t first, const float* x, float* y,
                    std::int64_t count, bool round) {
  if (round) {
    dropout_loop<true>(mask, first, x, y, count);
  } else {
    dropout_loop<false>(mask, first, x, y, count);
  }
}

// Where 64-bit multiplies vectorise (vpmullq): several times the scalar rate.
__attribute__((target("avx512f,avx512dq"))) void apply_avx512(const DropoutMask& mask,
                                                              std::uint64_t first, const float* x,
                                                              float* y, std::int64_t count,
                                                              bool round) {
  if (round) {
    dropout_loop<true>(mask, first, x, y, count);
  } else {
    dropout_loop<false>(mask, first, x, y, count);
  }
}

class OmpDropout final : public Kernel {
 public:
  OmpDropout(const KernelDesc& desc, bool avx512)
      : name_(op_name(desc.op)),
        avx512_(avx512),
        count_(element_count(desc.input_shapes.at(0))),
        p_(desc.attrs_as<DropoutAttrs>().p),
        stream_(desc.attrs_as<DropoutAttrs>().stream),
        desc_(desc),
        types_(operand_types(desc)) {}

  /// in: X (stored at round_to), rng (i32) -> Y (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const DropoutMask mask(in[1].data<std::int32_t>(), stream_, p_);
    const bool bf16 = in[0].dtype == DType::bf16;
    constexpr std::int64_t kChunk = 16384;
    const std::int64_t chunks = (count_ + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t begin = c * kChunk, n = std::min(kChunk, count_ - begin);
      const auto first = static_cast<std::uint64_t>(begin);
      if (bf16) {
        apply_dropout_bf16(mask, first, in[0].data<std::uint16_t>() + begin,
                           out[0].data<std::uint16_t>() + begin, n, avx512_);
      } else {
        apply_dropout(mask, first, in[0].data<float>() + begin, out[0].data<float>() + begin, n,
                      avx512_);
      }
    }
  }
  std::string implementation() const override {
    return fmt::format("omp {}{}", name_, avx512_ ? " avx512" : "");
  }
  double flops() const override {
    return 0.0;
  }

 private:
  std::string name_;
  bool avx512_;
  std::int64_t count_;
  double p_;
  std::uint64_t stream_;
  KernelDesc desc_;
  OperandTypes types_;
};

}  // namespace

void apply_dropout(const DropoutMask& mask, std::uint64_t first, const float* x, float* y,
                   std::int64_t count, bool avx512, bool round_to_bf16) {
  if (avx512) {
    apply_avx512(mask, first, x, y, count, round_to_bf16);
  } else {
    apply_portable(mask, first, x, y, count, round_to_bf16);
  }
}

void apply_dropout_bf16(const DropoutMask& mask, std::uint64_t first, const std::uint16_t* x,
                        std::uint16_t* y, std::int64_t count, bool avx512) {
  if (avx512) {
    apply_avx512_bf16(mask, first, x, y, count);
  } else {
    apply_portable_bf16(mask, first, x, y, count);
  }
}

std::unique_ptr<Kernel> make_omp_dropout(const KernelDesc& desc, bool avx512) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OmpDropout>(desc, avx512);
}

}  // namespace polyhal::cpu
