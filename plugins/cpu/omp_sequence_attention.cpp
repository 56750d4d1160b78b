#include "omp_sequence_attention.hpp"

#include <immintrin.h>
#include <algorithm>
#include <cmath>

#include "polyhal/kernel.hpp"

namespace polyhal::cpu {
namespace {

/// The token indices (in its row) of the keys one block's queries attend.
std::vector<std::int64_t> allowed_keys(const std::int32_t* row_mask, std::int64_t seq,
                                       std::int32_t sequence) {
  std::vector<std::int64_t> keys;
  for (std::int64_t t = 0; t < seq; ++t)
    if (attention_allows(sequence, row_mask[t])) keys.push_back(t);
  return keys;
}

/// Where one head of one block reads and writes: QKV's row, the keys'
/// token indices in it, and the per-thread scratch.
struct HeadWork {
  const float* row;  ///< QKV of the block's row
  const std::vector<std::int64_t>* keys;
  std::int64_t head;
  float* scores;  ///< [keys rounded up to kKeyGroup]
  float* keys_t;  ///< K transposed, [d, keys rounded up to kKeyGroup]
};

/// The softmax of `n` scores in place; returns 1 / their sum.
float softmax_in_place(float* scores, std::int64_t n) {
  float largest = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) largest = std::max(largest, scores[j]);
  float total = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - largest);
    total += scores[j];
  }
  return 1.0f / total;
}

/// One head of one block, any head width: scores of each query against its
/// keys, softmax, the weighted sum of the values.
void attend_generic(const AttentionBlock& block, const HeadWork& work, const AttentionDims& dims,
                    float* ctx) {
  const std::int64_t h = dims.h, h3 = 3 * h, d = dims.d;
  const std::int64_t* keys = work.keys->data();
  const auto n = static_cast<std::int64_t>(work.keys->size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t i = block.first; i < block.first + block.count; ++i) {
    const float* q = work.row + i * h3 + work.head * d;
    for (std::int64_t j = 0; j < n; ++j) {
      const float* k = work.row + keys[j] * h3 + h + work.head * d;
      float dot = 0.0f;
      for (std::int64_t c = 0; c < d; ++c) dot += q[c] * k[c];
      work.scores[j] = dot * scale;
    }
    const float inverse = softmax_in_place(work.scores, n);
    float* out = ctx + (block.row * dims.s + i) * h + work.head * d;
    std::fill(out, out + d, 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
      const float* v = work.row + keys[j] * h3 + 2 * h + work.head * d;
      for (std::int64_t c = 0; c < d; ++c) out[c] += work.scores[j] * v[c];
    }
    for (std::int64_t c = 0; c < d; ++c) out[c] *= inverse;
  }
}

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

/// softmax_in_place with AVX2: `scores` has room for whole registers past
/// `n`; the lanes past `n` are left zero.
[[gnu::target("avx2,fma")]] float softmax_avx2(float* scores, std::int64_t n) {
  float largest = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) largest = std::max(largest, scores[j]);
  const __m256 top = _mm256_set1_ps(largest);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 total = _mm256_setzero_ps();
  for (std::int64_t j = 0; j < n; j += 8) {
    __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + j), top));
    if (j + 8 > n) {
      const __m256i left = _mm256_set1_epi32(static_cast<int>(n - j));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, lanes)));
    }
    _mm256_storeu_ps(scores + j, e);
    total = _mm256_add_ps(total, e);
  }
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return 1.0f / _mm_cvtss_f32(sum);
}

/// Keys are computed in groups of 32 (four registers of 8), so each score
/// register's chain of multiply-adds runs beside three others.
constexpr std::int64_t kKeyGroup = 32;

/// The same with AVX2 and FMA, for head widths of a multiple of 8: K is
/// copied transposed ([d, keys], zero-padded to kKeyGroup keys), so 32
/// scores are d multiply-adds into four registers, and the context's 8 to
/// 32 values one pass over the keys.
[[gnu::target("avx2,fma")]] void attend_avx2(const AttentionBlock& block, const HeadWork& work,
                                             const AttentionDims& dims, float* ctx) {
  const std::int64_t h = dims.h, h3 = 3 * h, d = dims.d;
  const std::int64_t* keys = work.keys->data();
  const auto n = static_cast<std::int64_t>(work.keys->size());
  const std::int64_t padded = (n + kKeyGroup - 1) / kKeyGroup * kKeyGroup;
  for (std::int64_t c = 0; c < d; ++c) {
    float* column = work.keys_t + c * padded;
    const float* k = work.row + h + work.head * d + c;
    for (std::int64_t j = 0; j < n; ++j) column[j] = k[keys[j] * h3];
    std::fill(column + n, column + padded, 0.0f);
  }
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(d)));
  for (std::int64_t i = block.first; i < block.first + block.count; ++i) {
    const float* q = work.row + i * h3 + work.head * d;
    for (std::int64_t j = 0; j < padded; j += kKeyGroup) {
      // Four named registers: an array of them is kept in memory by GCC,
      // each multiply-add then waiting on a store.
      __m256 dot0 = _mm256_setzero_ps(), dot1 = dot0, dot2 = dot0, dot3 = dot0;
      for (std::int64_t c = 0; c < d; ++c) {
        const __m256 qc = _mm256_broadcast_ss(q + c);
        const float* column = work.keys_t + c * padded + j;
        dot0 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(column), dot0);
        dot1 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(column + 8), dot1);
        dot2 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(column + 16), dot2);
        dot3 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(column + 24), dot3);
      }
      _mm256_storeu_ps(work.scores + j, _mm256_mul_ps(dot0, scale));
      _mm256_storeu_ps(work.scores + j + 8, _mm256_mul_ps(dot1, scale));
      _mm256_storeu_ps(work.scores + j + 16, _mm256_mul_ps(dot2, scale));
      _mm256_storeu_ps(work.scores + j + 24, _mm256_mul_ps(dot3, scale));
    }
    const __m256 inverse = _mm256_set1_ps(softmax_avx2(work.scores, n));
    float* out = ctx + (block.row * dims.s + i) * h + work.head * d;
    const float* v = work.row + 2 * h + work.head * d;
    std::int64_t c = 0;
    for (; c + 32 <= d; c += 32) {
      __m256 sum0 = _mm256_setzero_ps(), sum1 = sum0, sum2 = sum0, sum3 = sum0;
      for (std::int64_t j = 0; j < n; ++j) {
        const __m256 p = _mm256_broadcast_ss(work.scores + j);
        const float* value = v + keys[j] * h3 + c;
        sum0 = _mm256_fmadd_ps(p, _mm256_loadu_ps(value), sum0);
        sum1 = _mm256_fmadd_ps(p, _mm256_loadu_ps(value + 8), sum1);
        sum2 = _mm256_fmadd_ps(p, _mm256_loadu_ps(value + 16), sum2);
        sum3 = _mm256_fmadd_ps(p, _mm256_loadu_ps(value + 24), sum3);
      }
      _mm256_storeu_ps(out + c, _mm256_mul_ps(sum0, inverse));
      _mm256_storeu_ps(out + c + 8, _mm256_mul_ps(sum1, inverse));
      _mm256_storeu_ps(out + c + 16, _mm256_mul_ps(sum2, inverse));
      _mm256_storeu_ps(out + c + 24, _mm256_mul_ps(sum3, inverse));
    }
    for (; c < d; c += 8) {
      __m256 sum = _mm256_setzero_ps();
      for (std::int64_t j = 0; j < n; ++j)
        sum = _mm256_fmadd_ps(_mm256_broadcast_ss(work.scores + j),
                              _mm256_loadu_ps(v + keys[j] * h3 + c), sum);
      _mm256_storeu_ps(out + c, _mm256_mul_ps(sum, inverse));
    }
  }
}

/// Keys one head of one block may have, rounded up to kKeyGroup.
std::size_t key_room(const AttentionDims& dims) {
  return static_cast<std::size_t>((dims.s + kKeyGroup - 1) / kKeyGroup * kKeyGroup);
}

}  // namespace

std::uint64_t sequence_attention_bytes(const AttentionDims& dims, int threads) {
  return static_cast<std::uint64_t>(threads) * key_room(dims) *
         static_cast<std::uint64_t>(dims.d + 1) * sizeof(float);
}

void sequence_attention_f32(const float* qkv, const std::int32_t* mask,
                            const std::vector<AttentionBlock>& blocks, const AttentionDims& dims,
                            float* ctx, bool avx2) {
  std::vector<std::vector<std::int64_t>> keys;
  keys.reserve(blocks.size());
  for (const AttentionBlock& block : blocks)
    keys.push_back(allowed_keys(mask + block.row * dims.s, dims.s, block.sequence));
  const auto units = static_cast<std::int64_t>(blocks.size()) * dims.heads;
  const bool vectors = avx2 && dims.d % 8 == 0;
  const std::size_t keys_room = key_room(dims);
#pragma omp parallel
  {
    std::vector<float> scores(keys_room), keys_t(static_cast<std::size_t>(dims.d) * keys_room);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const auto b = static_cast<std::size_t>(unit / dims.heads);
      const HeadWork work{qkv + blocks[b].row * dims.s * 3 * dims.h, &keys[b], unit % dims.heads,
                          scores.data(), keys_t.data()};
      if (vectors)
        attend_avx2(blocks[b], work, dims, ctx);
      else
        attend_generic(blocks[b], work, dims, ctx);
    }
  }
}

}  // namespace polyhal::cpu
