#include "omp_quantize.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which its
// own flow analysis then reports as uninitialised (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "polyhal/int8.hpp"

namespace polyhal::cpu {
namespace {

float load(const float* p, std::int64_t i) {
  return p[i];
}
float load(const std::uint16_t* p, std::int64_t i) {
  return bf16_bits_to_f32(p[i]);
}

/// x[i] times the smoothing factor of column i (int8.hpp), if any.
template <class T>
float load(const T* x, const float* factor, std::int64_t i) {
  return factor != nullptr ? load(x, i) * factor[i] : load(x, i);
}

/// The contract's rule, element by element.
template <class T>
float quantize_row_scalar(const T* x, const float* factor, std::int64_t n, std::int8_t* q) {
  float max_abs = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(load(x, factor, i)));
  const float step = int8_scale(max_abs);
  const float inverse = 1.0f / step;
  for (std::int64_t i = 0; i < n; ++i) q[i] = quantize_s8(load(x, factor, i), inverse);
  return step;
}

__attribute__((target("avx512f,avx512bw"))) __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
__attribute__((target("avx512f,avx512bw"))) __m512 load16(const std::uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

template <class T>
__attribute__((target("avx512f,avx512bw"))) __m512 load16(const T* x, const float* factor,
                                                          std::int64_t i) {
  const __m512 v = load16(x + i);
  return factor != nullptr ? _mm512_mul_ps(v, _mm512_loadu_ps(factor + i)) : v;
}

/// The same rule 16 lanes at a time: vcvtps2dq rounds to nearest even (the
/// default MXCSR mode) of values clamped to [-128, 127]. NaN is dropped
/// from the maximum (vmaxps returns its second operand) and becomes 0, like
/// quantize_s8. The tail goes through the scalar rule.
template <class T>
__attribute__((target("avx512f,avx512bw"))) float quantize_row_avx512(const T* x,
                                                                      const float* factor,
                                                                      std::int64_t n,
                                                                      std::int8_t* q) {
  __m512 max16 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) max16 = _mm512_max_ps(_mm512_abs_ps(load16(x, factor, i)), max16);
  float max_abs = _mm512_reduce_max_ps(max16);
  for (std::int64_t j = i; j < n; ++j) max_abs = std::max(max_abs, std::fabs(load(x, factor, j)));
  const float step = int8_scale(max_abs);
  const float inverse = 1.0f / step;
  const __m512 scale = _mm512_set1_ps(inverse);
  const __m512 low = _mm512_set1_ps(-128.0f), high = _mm512_set1_ps(127.0f);
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 product = _mm512_mul_ps(load16(x, factor, i), scale);
    // Clamped first, so that an infinity saturates as quantize_s8 does.
    const __m512 v = _mm512_mask_min_ps(product, _mm512_cmp_ps_mask(product, product, _CMP_ORD_Q),
                                        _mm512_max_ps(product, low), high);
    const __mmask16 number = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512i rounded = _mm512_maskz_cvtps_epi32(number, v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(rounded));
  }
  for (; i < n; ++i) q[i] = quantize_s8(load(x, factor, i), inverse);
  return step;
}

/// quantize_gelu_row_u8, 16 lanes at a time (same clamping and rounding).
template <class T>
__attribute__((target("avx512f,avx512bw"))) float quantize_gelu_row_avx512(const T* x,
                                                                           std::int64_t n,
                                                                           std::uint8_t* q) {
  const __m512 shift = _mm512_set1_ps(kGeluShift);
  __m512 max16 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) max16 = _mm512_max_ps(_mm512_add_ps(load16(x + i), shift), max16);
  float max_value = _mm512_reduce_max_ps(max16);
  for (std::int64_t j = i; j < n; ++j) max_value = std::max(max_value, load(x, j) + kGeluShift);
  const float step = std::isfinite(max_value) && max_value > 0.0f ? max_value / 255.0f : 1.0f;
  const float inverse = 1.0f / step;
  const __m512 scale = _mm512_set1_ps(inverse);
  const __m512 zero = _mm512_setzero_ps(), high = _mm512_set1_ps(255.0f);
  for (i = 0; i < n - 15; i += 16) {
    const __m512 shifted = _mm512_add_ps(load16(x + i), shift);
    const __mmask16 number = _mm512_cmp_ps_mask(shifted, shifted, _CMP_ORD_Q);
    const __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_max_ps(shifted, zero), scale), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                     _mm512_cvtusepi32_epi8(_mm512_maskz_cvtps_epu32(number, v)));
  }
  for (; i < n; ++i) {
    const float v = std::nearbyint(std::max(load(x, i) + kGeluShift, 0.0f) * inverse);
    q[i] = v == v ? static_cast<std::uint8_t>(std::min(v, 255.0f)) : std::uint8_t{0};
  }
  return step;
}

/// 8 floats rounded to nearest even (values already in [-128, 255]) into
/// 8 bytes, s8 (`u8` false) or u8.
__attribute__((target("avx2,fma"))) void store8(__m256 v, bool u8, void* q) {
  const __m256i rounded = _mm256_cvtps_epi32(v);
  const __m128i s16 =
      _mm_packs_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
  const __m128i bytes = u8 ? _mm_packus_epi16(s16, s16) : _mm_packs_epi16(s16, s16);
  _mm_storel_epi64(static_cast<__m128i*>(q), bytes);
}

__attribute__((target("avx2,fma"))) __m256 load8(const float* x, const float* factor,
                                                 std::int64_t i) {
  const __m256 v = _mm256_loadu_ps(x + i);
  return factor != nullptr ? _mm256_mul_ps(v, _mm256_loadu_ps(factor + i)) : v;
}

/// The largest of 8 lanes, and at least 0 (the running maxima start there).
__attribute__((target("avx2,fma"))) float largest_lane(__m256 lanes8) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, lanes8);
  float largest = 0.0f;
  for (const float lane : lanes) largest = std::max(largest, lane);
  return largest;
}

/// quantize_row_scalar 8 lanes at a time (f32), for CPUs without AVX-512:
/// the same clamping, rounding and NaN rule as quantize_row_avx512.
__attribute__((target("avx2,fma"))) float quantize_row_avx2(const float* x, const float* factor,
                                                            std::int64_t n, std::int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 max8 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    max8 = _mm256_max_ps(_mm256_andnot_ps(sign, load8(x, factor, i)), max8);
  float max_abs = largest_lane(max8);
  for (std::int64_t j = i; j < n; ++j) max_abs = std::max(max_abs, std::fabs(load(x, factor, j)));
  const float step = int8_scale(max_abs);
  const float inverse = 1.0f / step;
  const __m256 scale = _mm256_set1_ps(inverse);
  const __m256 low = _mm256_set1_ps(-128.0f), high = _mm256_set1_ps(127.0f);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 product = _mm256_mul_ps(load8(x, factor, i), scale);
    // NaN lanes become 0 (the mask is all zeros there); infinities saturate.
    const __m256 number = _mm256_cmp_ps(product, product, _CMP_ORD_Q);
    const __m256 v = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(product, low), high), number);
    store8(v, false, q + i);
  }
  for (; i < n; ++i) q[i] = quantize_s8(load(x, factor, i), inverse);
  return step;
}

/// quantize_gelu_row_avx512's rule 8 lanes at a time (f32).
__attribute__((target("avx2,fma"))) float quantize_gelu_row_avx2(const float* x, std::int64_t n,
                                                                 std::uint8_t* q) {
  const __m256 shift = _mm256_set1_ps(kGeluShift);
  __m256 max8 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    max8 = _mm256_max_ps(_mm256_add_ps(_mm256_loadu_ps(x + i), shift), max8);
  float max_value = largest_lane(max8);
  for (std::int64_t j = i; j < n; ++j) max_value = std::max(max_value, x[j] + kGeluShift);
  const float step = std::isfinite(max_value) && max_value > 0.0f ? max_value / 255.0f : 1.0f;
  const float inverse = 1.0f / step;
  const __m256 scale = _mm256_set1_ps(inverse);
  const __m256 zero = _mm256_setzero_ps(), high = _mm256_set1_ps(255.0f);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 shifted = _mm256_add_ps(_mm256_loadu_ps(x + i), shift);
    const __m256 number = _mm256_cmp_ps(shifted, shifted, _CMP_ORD_Q);
    const __m256 v = _mm256_min_ps(_mm256_mul_ps(_mm256_max_ps(shifted, zero), scale), high);
    store8(_mm256_and_ps(v, number), true, q + i);
  }
  for (; i < n; ++i) {
    const float v = std::nearbyint(std::max(x[i] + kGeluShift, 0.0f) * inverse);
    q[i] = v == v ? static_cast<std::uint8_t>(std::min(v, 255.0f)) : std::uint8_t{0};
  }
  return step;
}

template <class T>
float quantize_gelu_row_scalar(const T* x, std::int64_t n, std::uint8_t* q) {
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) row[static_cast<std::size_t>(i)] = load(x, i);
  return quantize_gelu_row_u8(row, std::span(q, static_cast<std::size_t>(n)));
}

#pragma GCC diagnostic pop

/// q + 128 as u8 for n values: two's complement with the sign bit flipped,
/// eight at a time.
void flip_sign_bits(std::int8_t* q, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, q + i, sizeof word);
    word ^= 0x8080808080808080u;
    std::memcpy(q + i, &word, sizeof word);
  }
  for (; i < n; ++i) q[i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(q[i]) ^ 0x80u);
}

template <class T>
void quantize_rows(const T* x, const float* factor, std::int64_t rows, std::int64_t columns,
                   std::int8_t* q, float* step, bool avx512, bool plus_128) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * columns;
    std::int8_t* out = q + r * columns;
    if (avx512) {
      step[r] = quantize_row_avx512(row, factor, columns, out);
    } else if constexpr (std::is_same_v<T, float>) {
      step[r] = quantize_row_avx2(row, factor, columns, out);
    } else {
      step[r] = quantize_row_scalar(row, factor, columns, out);
    }
    if (plus_128) flip_sign_bits(out, columns);
  }
}

template <class T>
void quantize_gelu_rows(const T* x, std::int64_t rows, std::int64_t columns, std::uint8_t* q,
                        float* step, bool avx512) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * columns;
    std::uint8_t* out = q + r * columns;
    if (avx512) {
      step[r] = quantize_gelu_row_avx512(row, columns, out);
    } else if constexpr (std::is_same_v<T, float>) {
      step[r] = quantize_gelu_row_avx2(row, columns, out);
    } else {
      step[r] = quantize_gelu_row_scalar(row, columns, out);
    }
  }
}

}  // namespace

void quantize_gelu_rows_u8(const void* x, DType type, std::int64_t rows, std::int64_t columns,
                           std::uint8_t* q, float* step, bool avx512) {
  if (type == DType::bf16) {
    quantize_gelu_rows(static_cast<const std::uint16_t*>(x), rows, columns, q, step, avx512);
  } else {
    quantize_gelu_rows(static_cast<const float*>(x), rows, columns, q, step, avx512);
  }
}

void quantize_rows_s8(const void* x, DType type, std::int64_t rows, std::int64_t columns,
                      std::int8_t* q, float* step, bool avx512, const float* column_factor,
                      bool plus_128) {
  if (type == DType::bf16) {
    quantize_rows(static_cast<const std::uint16_t*>(x), column_factor, rows, columns, q, step,
                  avx512, plus_128);
  } else {
    quantize_rows(static_cast<const float*>(x), column_factor, rows, columns, q, step, avx512,
                  plus_128);
  }
}

void add_128(std::int8_t* q, std::int64_t n) {
  constexpr std::int64_t kChunk = 1 << 16;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c)
    flip_sign_bits(q + c * kChunk, std::min(kChunk, n - c * kChunk));
}

}  // namespace polyhal::cpu
