#include "omp_dropout.hpp"

#include <fmt/format.h>

#include <algorithm>
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
        bf16_(round_type(desc) == DType::bf16) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const DropoutMask mask(in[1].data<std::int32_t>(), stream_, p_);
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    constexpr std::int64_t kChunk = 16384;
    const std::int64_t chunks = (count_ + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t begin = c * kChunk, n = std::min(kChunk, count_ - begin);
      apply_dropout(mask, static_cast<std::uint64_t>(begin), x + begin, y + begin, n, avx512_,
                    bf16_);
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
  bool bf16_;
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

std::unique_ptr<Kernel> make_omp_dropout(const KernelDesc& desc, bool avx512) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OmpDropout>(desc, avx512);
}

}  // namespace polyhal::cpu
