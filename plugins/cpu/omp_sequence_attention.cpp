#include "omp_sequence_attention.hpp"

#include <immintrin.h>
#include <algorithm>
#include <cmath>

#include "avx2_math.hpp"
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
  float* scores;  ///< [kQueryGroup, keys rounded up to kKeyGroup]
  float* keys_t;  ///< K transposed, [d, keys rounded up], rows column_stride apart
  float* values;  ///< V of the keys, [keys, d], contiguous
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

/// Scores are computed 16 keys (two registers) at a time for up to four
/// queries at once, so each load of K^T or V feeds eight multiply-adds: one
/// query at a time, a padding block's thousand keys were streamed from L2
/// once per query, most of a packed batch's attention time.
constexpr std::int64_t kKeyGroup = 16;
constexpr int kQueryGroup = 4;
/// K^T's rows (d of them, one per head dimension) are an odd number of
/// cache lines apart, so a key's d values land in d different L1 sets: 1,024
/// keys apart, they all fell in one set, and the copy took longer than the
/// products.
constexpr std::int64_t kLineFloats = 16;
/// How many keys ahead their K and V are prefetched while copying.
constexpr std::int64_t kPrefetchKeys = 8;
std::int64_t column_stride(std::int64_t padded) {
  return padded / kLineFloats % 2 == 0 ? padded + kLineFloats : padded;
}

/// Q queries of one head: scores against the n keys (work.keys_t, rows
/// `stride` apart), softmax, the weighted sum of the values (work.values)
/// into `out`.
template <int Q>
[[gnu::target("avx2,fma")]] inline void attend_queries(const float* const* q, float* const* out,
                                                       const HeadWork& work, std::int64_t n,
                                                       std::int64_t stride, std::int64_t d) {
  const std::int64_t padded = (n + kKeyGroup - 1) / kKeyGroup * kKeyGroup;
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(d)));
  for (std::int64_t j = 0; j < padded; j += kKeyGroup) {
    __m256 low[Q], high[Q];
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) low[i] = high[i] = _mm256_setzero_ps();
    for (std::int64_t c = 0; c < d; ++c) {
      const float* column = work.keys_t + c * stride + j;
      const __m256 k0 = _mm256_loadu_ps(column), k1 = _mm256_loadu_ps(column + 8);
#pragma GCC unroll 4
      for (int i = 0; i < Q; ++i) {
        const __m256 qc = _mm256_broadcast_ss(q[i] + c);
        low[i] = _mm256_fmadd_ps(qc, k0, low[i]);
        high[i] = _mm256_fmadd_ps(qc, k1, high[i]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) {
      _mm256_storeu_ps(work.scores + i * padded + j, _mm256_mul_ps(low[i], scale));
      _mm256_storeu_ps(work.scores + i * padded + j + 8, _mm256_mul_ps(high[i], scale));
    }
  }
  __m256 inverse[Q];
#pragma GCC unroll 4
  for (int i = 0; i < Q; ++i)
    inverse[i] = _mm256_set1_ps(softmax_avx2(work.scores + i * padded, n));
  for (std::int64_t c = 0; c < d; c += 16) {
    const bool two = c + 16 <= d;  // else the last 8 of d
    __m256 low[Q], high[Q];
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) low[i] = high[i] = _mm256_setzero_ps();
    for (std::int64_t j = 0; j < n; ++j) {
      const float* value = work.values + j * d + c;
      const __m256 v0 = _mm256_loadu_ps(value);
      const __m256 v1 = two ? _mm256_loadu_ps(value + 8) : _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int i = 0; i < Q; ++i) {
        const __m256 p = _mm256_broadcast_ss(work.scores + i * padded + j);
        low[i] = _mm256_fmadd_ps(p, v0, low[i]);
        high[i] = _mm256_fmadd_ps(p, v1, high[i]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) {
      _mm256_storeu_ps(out[i] + c, _mm256_mul_ps(low[i], inverse[i]));
      if (two) _mm256_storeu_ps(out[i] + c + 8, _mm256_mul_ps(high[i], inverse[i]));
    }
  }
}

/// The same with AVX2 and FMA, for head widths of a multiple of 8: K is
/// copied transposed ([d, keys], zero-padded to kKeyGroup keys), then the
/// block's queries go four at a time.
[[gnu::target("avx2,fma")]] void attend_avx2(const AttentionBlock& block, const HeadWork& work,
                                             const AttentionDims& dims, float* ctx) {
  const std::int64_t h = dims.h, h3 = 3 * h, d = dims.d;
  const std::int64_t* keys = work.keys->data();
  const auto n = static_cast<std::int64_t>(work.keys->size());
  const std::int64_t padded = (n + kKeyGroup - 1) / kKeyGroup * kKeyGroup;
  const std::int64_t stride = column_stride(padded);
  // Keys and values are copied once per head, prefetched a few keys ahead:
  // in QKV each key's row is 3H floats (9 KiB at BERT-base) from the next,
  // a page apart, where the hardware prefetcher does not follow, and the
  // values were read once per four queries (a padding block has a thousand
  // keys).
  for (std::int64_t j = 0; j < n; ++j) {
    if (j + kPrefetchKeys < n) {
      const auto* next = reinterpret_cast<const char*>(work.row + keys[j + kPrefetchKeys] * h3 + h +
                                                       work.head * d);
      for (std::int64_t byte = 0; byte < d * 4; byte += 64) {
        _mm_prefetch(next + byte, _MM_HINT_T0);
        _mm_prefetch(next + h * 4 + byte, _MM_HINT_T0);
      }
    }
    const float* k = work.row + keys[j] * h3 + h + work.head * d;
    for (std::int64_t c = 0; c < d; ++c) work.keys_t[c * stride + j] = k[c];
    for (std::int64_t c = 0; c < d; c += 8)
      _mm256_storeu_ps(work.values + j * d + c, _mm256_loadu_ps(k + h + c));
  }
  for (std::int64_t c = 0; c < d; ++c)
    std::fill(work.keys_t + c * stride + n, work.keys_t + c * stride + padded, 0.0f);
  const float* q[kQueryGroup];
  float* out[kQueryGroup];
  for (std::int64_t i = block.first; i < block.first + block.count; i += kQueryGroup) {
    const auto count =
        static_cast<int>(std::min<std::int64_t>(kQueryGroup, block.first + block.count - i));
    for (int g = 0; g < count; ++g) {
      q[g] = work.row + (i + g) * h3 + work.head * d;
      out[g] = ctx + (block.row * dims.s + i + g) * h + work.head * d;
    }
    switch (count) {
      case 4:
        attend_queries<4>(q, out, work, n, stride, d);
        break;
      case 3:
        attend_queries<3>(q, out, work, n, stride, d);
        break;
      case 2:
        attend_queries<2>(q, out, work, n, stride, d);
        break;
      default:
        attend_queries<1>(q, out, work, n, stride, d);
        break;
    }
  }
}

/// Keys one head of one block may have, rounded up to kKeyGroup.
std::size_t key_room(const AttentionDims& dims) {
  return static_cast<std::size_t>((dims.s + kKeyGroup - 1) / kKeyGroup * kKeyGroup);
}

/// Floats of one thread's scratch: kQueryGroup rows of scores, K^T and V.
std::size_t scratch_floats(const AttentionDims& dims) {
  return key_room(dims) * kQueryGroup +
         static_cast<std::size_t>(dims.d) * (2 * key_room(dims) + kLineFloats);
}

}  // namespace

std::uint64_t sequence_attention_bytes(const AttentionDims& dims, int threads) {
  return static_cast<std::uint64_t>(threads) * scratch_floats(dims) * sizeof(float);
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
    std::vector<float> scores(keys_room * kQueryGroup),
        keys_t(static_cast<std::size_t>(dims.d) * (keys_room + kLineFloats)),
        values(static_cast<std::size_t>(dims.d) * keys_room);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const auto b = static_cast<std::size_t>(unit / dims.heads);
      const HeadWork work{qkv + blocks[b].row * dims.s * 3 * dims.h,
                          &keys[b],
                          unit % dims.heads,
                          scores.data(),
                          keys_t.data(),
                          values.data()};
      if (vectors)
        attend_avx2(blocks[b], work, dims, ctx);
      else
        attend_generic(blocks[b], work, dims, ctx);
    }
  }
}

}  // namespace polyhal::cpu
