#pragma once
// Element-wise functions of 8 floats with AVX2 and FMA, for the kernels'
// own loops (attention's softmax, the int8 linear's epilogue). Each is
// compiled for AVX2 wherever it is included; callers choose it only where
// the device's ISA choice allows AVX2.
#include <immintrin.h>

namespace polyhal::cpu {

/// e^x of 8 floats (x <= 88), Cephes' expf: x = n ln2 + r with |r| <=
/// ln2 / 2, e^r by its degree-7 polynomial, times 2^n through the exponent
/// bits. Within 2 ulp of expf; below -87.3 (where e^x is no longer a normal
/// float) it gives about 1e-38, not 0. Scalar expf cost 15 times the
/// products of a 28-token sentence's attention.
[[gnu::target("avx2,fma")]] inline __m256 exp_avx2(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i exponent = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), exponent));
}

/// erf(x) of 8 floats: Abramowitz and Stegun 7.1.26, 1 - (a1 t + ... +
/// a5 t^5) e^(-x^2) with t = 1 / (1 + p |x|), the sign of x restored;
/// within 1.5e-7 of erf.
[[gnu::target("avx2,fma")]] inline __m256 erf_avx2(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 t = _mm256_div_ps(
      _mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
  __m256 y = _mm256_set1_ps(1.061405429f);
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-1.453152027f));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(1.421413741f));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-0.284496736f));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(0.254829592f));
  y = _mm256_mul_ps(y, t);
  const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
  const __m256 r = _mm256_fnmadd_ps(y, e, _mm256_set1_ps(1.0f));
  return _mm256_or_ps(r, sign);
}

/// GELU with erf (Hugging Face's "gelu"): x / 2 (1 + erf(x / sqrt 2)).
[[gnu::target("avx2,fma")]] inline __m256 gelu_erf_avx2(__m256 x) {
  const __m256 e = erf_avx2(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                       _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
}

}  // namespace polyhal::cpu
