#include "omp_convert.hpp"

#include "polyhal/dtype.hpp"

namespace polyhal::cpu {

void to_bf16(const float* src, std::uint16_t* dst, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = detail::bf16_bits_inline(src[i]);
}

void round_to_bf16(float* values, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) values[i] = detail::round_bf16_inline(values[i]);
}

}  // namespace polyhal::cpu
