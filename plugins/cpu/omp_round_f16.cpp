#include "omp_round_f16.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which its
// own flow analysis then reports as uninitialised (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "polyhal/dtype.hpp"

namespace polyhal::cpu {
namespace {

constexpr std::int64_t kBlock = 4096;  // elements per OpenMP task: 16 KiB in, 16 KiB out

/// vcvtps2ph rounds to nearest even (immediate 0) and keeps NaN, infinity
/// and subnormals as IEEE binary16 does, as f32_to_f16_bits does.
__attribute__((target("avx512f"))) void round_block_avx512(const float* in, float* out,
                                                           std::int64_t count) {
  std::int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i half = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(half));
  }
  for (; i < count; ++i) out[i] = round_through(DType::f16, in[i]);
}

void round_block_scalar(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = round_through(DType::f16, in[i]);
}

}  // namespace

void round_through_f16(const float* in, float* out, std::int64_t count, bool avx512) {
  const std::int64_t blocks = (count + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kBlock;
    const std::int64_t n = std::min(kBlock, count - begin);
    if (avx512)
      round_block_avx512(in + begin, out + begin, n);
    else
      round_block_scalar(in + begin, out + begin, n);
  }
}

}  // namespace polyhal::cpu

#pragma GCC diagnostic pop
