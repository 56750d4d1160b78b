#include "avx2_int8_epilogue.hpp"

#include <immintrin.h>

#include <stdexcept>

#include "avx2_math.hpp"

namespace polyhal::cpu {
namespace {

[[gnu::target("avx2,fma")]] void finish_rows(const std::int32_t* sums, std::int64_t m,
                                             std::int64_t n, const std::int32_t* weight_sums,
                                             const Int8Epilogue& e, float* out) {
  const __m256i zero_point = _mm256_set1_epi32(e.zero_point);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < m; ++r) {
    const __m256 row = _mm256_set1_ps(e.row_step ? e.row_step[r] : 1.0f);
    for (std::int64_t c = 0; c < n; c += 8) {
      const __m256i shift = _mm256_mullo_epi32(
          zero_point, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weight_sums + c)));
      // sums and out may be one buffer: these 8 sums are read before their
      // outputs are stored over them.
      const __m256i row_sums =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * n + c));
      __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(row_sums, shift)),
                                 _mm256_mul_ps(_mm256_loadu_ps(e.column_step + c), row),
                                 _mm256_loadu_ps(e.bias + c));
      if (e.activation == Activation::gelu) v = gelu_erf_avx2(v);
      if (e.residual) v = _mm256_add_ps(v, _mm256_loadu_ps(e.residual + r * n + c));
      _mm256_storeu_ps(out + r * n + c, v);
    }
  }
}

}  // namespace

void avx2_int8_epilogue(const std::int32_t* sums, std::int64_t m, std::int64_t n,
                        const std::int32_t* weight_sums, const Int8Epilogue& epilogue, float* out) {
  if (n % 8 != 0) throw std::invalid_argument("avx2_int8_epilogue: N must be a multiple of 8");
  finish_rows(sums, m, n, weight_sums, epilogue, out);
}

}  // namespace polyhal::cpu
