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
  const std::int64_t chunks = d % 32 == 0 ? 4 : 1;  // context registers per pass
  for (std::int64_t i = block.first; i < block.first + block.count; ++i) {
    const float* q = work.row + i * h3 + work.head * d;
    for (std::int64_t j = 0; j < padded; j += kKeyGroup) {
      __m256 dot[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
      for (std::int64_t c = 0; c < d; ++c) {
        const __m256 qc = _mm256_broadcast_ss(q + c);
        const float* column = work.keys_t + c * padded + j;
        for (int r = 0; r < 4; ++r)
          dot[r] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(column + 8 * r), dot[r]);
      }
      for (int r = 0; r < 4; ++r)
        _mm256_storeu_ps(work.scores + j + 8 * r, _mm256_mul_ps(dot[r], scale));
    }
    const __m256 inverse = _mm256_set1_ps(softmax_in_place(work.scores, n));
    float* out = ctx + (block.row * dims.s + i) * h + work.head * d;
    for (std::int64_t c = 0; c < d; c += 8 * chunks) {
      __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
      const float* v = work.row + 2 * h + work.head * d + c;
      for (std::int64_t j = 0; j < n; ++j) {
        const __m256 p = _mm256_broadcast_ss(work.scores + j);
        const float* value = v + keys[j] * h3;
        for (std::int64_t r = 0; r < chunks; ++r)
          sum[r] = _mm256_fmadd_ps(p, _mm256_loadu_ps(value + 8 * r), sum[r]);
      }
      for (std::int64_t r = 0; r < chunks; ++r)
        _mm256_storeu_ps(out + c + 8 * r, _mm256_mul_ps(sum[r], inverse));
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
  const std::size_t keys_room =
      static_cast<std::size_t>((dims.s + kKeyGroup - 1) / kKeyGroup * kKeyGroup);
#pragma omp parallel
  {
    std::vector<float> scores(keys_room), keys_t(static_cast<std::size_t>(dims.d) * keys_room);
#pragma omp for schedule(dynamic, 4)
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
