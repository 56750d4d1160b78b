#include "omp_sequence_attention.hpp"

#include <algorithm>
#include <cmath>

#include "polyhal/kernel.hpp"

namespace polyhal::cpu {
namespace {

/// The keys one block's queries attend: runs of consecutive tokens.
struct KeyRun {
  std::int64_t first = 0, count = 0;
};

std::vector<KeyRun> allowed_keys(const std::int32_t* row_mask, std::int64_t seq,
                                 std::int32_t sequence) {
  std::vector<KeyRun> runs;
  for (std::int64_t t = 0; t < seq; ++t) {
    if (!attention_allows(sequence, row_mask[t])) continue;
    if (!runs.empty() && runs.back().first + runs.back().count == t)
      ++runs.back().count;
    else
      runs.push_back({t, 1});
  }
  return runs;
}

/// One head of one block: scores of each query against its keys, softmax,
/// and the weighted sum of the values. Inlined into an AVX2 and a generic
/// caller, whose `omp simd` loops the compiler vectorises for each.
[[gnu::always_inline]] inline void attend(const float* qkv, const AttentionBlock& block,
                                          const std::vector<KeyRun>& keys, std::int64_t head,
                                          const AttentionDims& dims, float* scores, float* ctx) {
  const std::int64_t h = dims.h, h3 = 3 * h, d = dims.d, seq = dims.s;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float* row = qkv + block.row * seq * h3;
  for (std::int64_t i = block.first; i < block.first + block.count; ++i) {
    const float* q = row + i * h3 + head * d;
    std::int64_t n = 0;
    float largest = -INFINITY;
    for (const KeyRun& run : keys) {
      for (std::int64_t j = run.first; j < run.first + run.count; ++j, ++n) {
        const float* k = row + j * h3 + h + head * d;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (std::int64_t c = 0; c < d; ++c) dot += q[c] * k[c];
        scores[n] = dot * scale;
        largest = std::max(largest, scores[n]);
      }
    }
    float total = 0.0f;
    for (std::int64_t j = 0; j < n; ++j) {
      scores[j] = std::exp(scores[j] - largest);
      total += scores[j];
    }
    float* out = ctx + (block.row * seq + i) * h + head * d;
    std::fill(out, out + d, 0.0f);
    n = 0;
    for (const KeyRun& run : keys) {
      for (std::int64_t j = run.first; j < run.first + run.count; ++j, ++n) {
        const float* v = row + j * h3 + 2 * h + head * d;
        const float p = scores[n];
#pragma omp simd
        for (std::int64_t c = 0; c < d; ++c) out[c] += p * v[c];
      }
    }
    const float inverse = 1.0f / total;
#pragma omp simd
    for (std::int64_t c = 0; c < d; ++c) out[c] *= inverse;
  }
}

[[gnu::target("avx2,fma")]] void attend_avx2(const float* qkv, const AttentionBlock& block,
                                             const std::vector<KeyRun>& keys, std::int64_t head,
                                             const AttentionDims& dims, float* scores, float* ctx) {
  attend(qkv, block, keys, head, dims, scores, ctx);
}

void attend_generic(const float* qkv, const AttentionBlock& block, const std::vector<KeyRun>& keys,
                    std::int64_t head, const AttentionDims& dims, float* scores, float* ctx) {
  attend(qkv, block, keys, head, dims, scores, ctx);
}

}  // namespace

void sequence_attention_f32(const float* qkv, const std::int32_t* mask,
                            const std::vector<AttentionBlock>& blocks, const AttentionDims& dims,
                            float* ctx, bool avx2) {
  std::vector<std::vector<KeyRun>> keys;
  keys.reserve(blocks.size());
  for (const AttentionBlock& block : blocks)
    keys.push_back(allowed_keys(mask + block.row * dims.s, dims.s, block.sequence));
  const auto units = static_cast<std::int64_t>(blocks.size()) * dims.heads;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(dims.s));
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const auto b = static_cast<std::size_t>(unit / dims.heads);
      const std::int64_t head = unit % dims.heads;
      if (avx2)
        attend_avx2(qkv, blocks[b], keys[b], head, dims, scores.data(), ctx);
      else
        attend_generic(qkv, blocks[b], keys[b], head, dims, scores.data(), ctx);
    }
  }
}

}  // namespace polyhal::cpu
