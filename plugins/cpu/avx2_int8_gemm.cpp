#include "avx2_int8_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "avx2_math.hpp"

namespace polyhal::cpu {
namespace {

constexpr std::int64_t kPanel = 16;  // output channels per panel: two registers of 8
constexpr int kRows = 4;             // rows of X per tile
/// Rows of X are taken in blocks of about this many bytes, which stay in
/// L2 while every panel of W passes over them (X of 1,024 x 768 is 768 KiB).
constexpr std::int64_t kBlockBytes = 256 * 1024;

/// Outputs [m, n0, n0 + 8) from their s32 sums: the epilogue of
/// Int8Epilogue, `shift` being zero_point x the columns' sums of W.
[[gnu::target("avx2,fma")]] inline void finish8(__m256i sums, __m256i shift, __m256 step,
                                                __m256 bias, std::int64_t m, std::int64_t n0,
                                                std::int64_t n, const Int8Epilogue& e, float* out) {
  const __m256 row = _mm256_set1_ps(e.row_step ? e.row_step[m] : 1.0f);
  __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sums, shift)),
                             _mm256_mul_ps(step, row), bias);
  if (e.activation == Activation::gelu) v = gelu_erf_avx2(v);
  if (e.residual) v = _mm256_add_ps(v, _mm256_loadu_ps(e.residual + m * n + n0));
  _mm256_storeu_ps(out + m * n + n0, v);
}

/// Rows [m0, m0 + R) of one panel: the s32 sums of X x W^T over K, then the
/// epilogue, stored to out.
template <int R>
[[gnu::target("avx2,fma")]] void tile(const std::uint8_t* x, std::int64_t m0, std::int64_t n0,
                                      const Avx2Int8Weights& w, const Int8Epilogue& e, float* out) {
  const std::int64_t k = w.k(), n = w.n();
  const std::int8_t* b = w.panel(n0);
  __m256i low[R], high[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) low[r] = high[r] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (std::int64_t kq = 0; kq < k; kq += 4) {
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + kq * kPanel));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + kq * kPanel + 32));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      std::int32_t four;
      std::memcpy(&four, x + (m0 + r) * k + kq, sizeof four);
      const __m256i a = _mm256_set1_epi32(four);
      low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
      high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
    }
  }
  const __m256i zero_point = _mm256_set1_epi32(e.zero_point);
  const __m256i shift0 = _mm256_mullo_epi32(
      zero_point, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sums() + n0)));
  const __m256i shift1 = _mm256_mullo_epi32(
      zero_point, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sums() + n0 + 8)));
  const __m256 step0 = _mm256_loadu_ps(e.column_step + n0);
  const __m256 step1 = _mm256_loadu_ps(e.column_step + n0 + 8);
  const __m256 bias0 = _mm256_loadu_ps(e.bias + n0), bias1 = _mm256_loadu_ps(e.bias + n0 + 8);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    finish8(low[r], shift0, step0, bias0, m0 + r, n0, n, e, out);
    finish8(high[r], shift1, step1, bias1, m0 + r, n0 + 8, n, e, out);
  }
}

/// The epilogue alone, over sums computed elsewhere, row by row.
[[gnu::target("avx2,fma")]] void finish_rows(const std::int32_t* sums, std::int64_t m,
                                             std::int64_t n, const std::int32_t* weight_sums,
                                             const Int8Epilogue& e, float* out) {
  const __m256i zero_point = _mm256_set1_epi32(e.zero_point);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t c = 0; c < n; c += 8) {
      const __m256i shift = _mm256_mullo_epi32(
          zero_point, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weight_sums + c)));
      // sums and out may be one buffer: these 8 sums are read before their
      // outputs are stored over them.
      const __m256i row_sums =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * n + c));
      finish8(row_sums, shift, _mm256_loadu_ps(e.column_step + c), _mm256_loadu_ps(e.bias + c), r,
              c, n, e, out);
    }
  }
}

/// n * k, once the sizes are known to fit the packing.
std::uint64_t checked_bytes(std::int64_t n, std::int64_t k) {
  if (!Avx2Int8Weights::fits(n, k) || n <= 0 || k <= 0)
    throw std::invalid_argument("Avx2Int8Weights: N must be a positive multiple of 16 and K of 4");
  return static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(k);
}

}  // namespace

Avx2Int8Weights::Avx2Int8Weights(const std::int8_t* w, std::int64_t n, std::int64_t k)
    : n_(n),
      k_(k),
      packed_(allocate_aligned(checked_bytes(n, k))),
      sums_(static_cast<std::size_t>(n), 0) {
  auto* packed = reinterpret_cast<std::int8_t*>(packed_.get());
  for (std::int64_t c = 0; c < n; ++c) {
    const std::int8_t* row = w + c * k;
    std::int8_t* panel = packed + (c / kPanel) * kPanel * k + (c % kPanel) * 4;
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      panel[(i / 4) * kPanel * 4 + i % 4] = row[i];
      sum += row[i];
    }
    sums_[static_cast<std::size_t>(c)] = sum;
  }
}

void avx2_int8_gemm(const std::uint8_t* x, std::int64_t m, const Avx2Int8Weights& w,
                    const Int8Epilogue& epilogue, float* out) {
  const std::int64_t panels = w.n() / kPanel;
  const std::int64_t block = std::max<std::int64_t>(kRows, kBlockBytes / w.k() / kRows * kRows);
#pragma omp parallel
  for (std::int64_t first = 0; first < m; first += block) {
    const std::int64_t end = std::min(m, first + block);
    const std::int64_t whole = first + (end - first) / kRows * kRows;
#pragma omp for schedule(static) nowait
    for (std::int64_t p = 0; p < panels; ++p) {
      for (std::int64_t r = first; r < whole; r += kRows)
        tile<kRows>(x, r, p * kPanel, w, epilogue, out);
      switch (end - whole) {
        case 3:
          tile<3>(x, whole, p * kPanel, w, epilogue, out);
          break;
        case 2:
          tile<2>(x, whole, p * kPanel, w, epilogue, out);
          break;
        case 1:
          tile<1>(x, whole, p * kPanel, w, epilogue, out);
          break;
        default:
          break;
      }
    }
  }
}

void avx2_int8_epilogue(const std::int32_t* sums, std::int64_t m, std::int64_t n,
                        const std::int32_t* weight_sums, const Int8Epilogue& epilogue, float* out) {
  if (n % 8 != 0) throw std::invalid_argument("avx2_int8_epilogue: N must be a multiple of 8");
  finish_rows(sums, m, n, weight_sums, epilogue, out);
}

}  // namespace polyhal::cpu
