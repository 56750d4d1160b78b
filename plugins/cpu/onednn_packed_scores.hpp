#pragma once
// Attention scores, shared by the inference and training attention kernels:
// the scale-and-mask matmul's attributes, and for packed rows (several
// sequences per row, kernel.hpp attention_allows) the variant with a
// [B, 1, S, S] additive mask instead of the per-key [B, 1, 1, S] one, made
// when a packed batch first comes.
#include <dnnl.hpp>

#include <algorithm>
#include <cstdint>

#include "onednn_api.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

/// The lowest f32: added to a score, it leaves exp() exactly 0.
inline constexpr float kMasked = -3.4028234663852886e38f;

/// Whether a mask holds packed sequences (a value above 1).
inline bool packed_row(const std::int32_t* mask, std::int64_t count) {
  return std::any_of(mask, mask + count, [](std::int32_t m) { return m > 1; });
}

/// The additive [B, 1, S, S] mask of every (query, key) pair of each row.
inline void fill_packed_mask(const std::int32_t* sequence, std::int64_t b, std::int64_t s,
                             float* additive) {
  for (std::int64_t r = 0; r < b; ++r) {
    const std::int32_t* m = sequence + r * s;
    for (std::int64_t i = 0; i < s; ++i) {
      float* row = additive + (r * s + i) * s;
      for (std::int64_t j = 0; j < s; ++j) row[j] = attention_allows(m[i], m[j]) ? 0.0f : kMasked;
    }
  }
}

/// The execution argument of scores_attr's mask (its second post-op).
inline constexpr int kScoresMaskArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1;

/// The attention scores' matmul attributes: q k^T scaled by 1/sqrt(d), plus
/// an additive mask of `mask_md` ([B,1,1,S] per key, or [B,1,S,S] packed).
/// `user_scratchpad`: the kernel passes its own scratchpad memory.
inline dnnl::primitive_attr scores_attr(float scale, const dnnl::memory::desc& mask_md,
                                        bool user_scratchpad) {
  dnnl::primitive_attr attr;
  // The scale as a linear post-op on the accumulator, ahead of the mask: the
  // same arithmetic as oneDNN 2.6's output scales, with no runtime argument.
  dnnl::post_ops scale_and_mask;
  onednn::append_eltwise(scale_and_mask, dnnl::algorithm::eltwise_linear, scale);
  scale_and_mask.append_binary(dnnl::algorithm::binary_add, mask_md);
  attr.set_post_ops(scale_and_mask);
  if (user_scratchpad) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// The [B, 1, S, S] mask's descriptor ([B, heads, S, S]: a mask per head,
/// MPNet's relative-position bias).
inline dnnl::memory::desc packed_mask_md(std::int64_t b, std::int64_t s,
                                         std::int64_t mask_heads = 1) {
  return {{b, mask_heads, s, s}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abcd};
}

struct PackedScores {
  PackedScores(const dnnl::memory::desc& scores_md, const dnnl::memory::desc& q_md,
               const dnnl::memory::desc& kt_md, std::int64_t batch, std::int64_t seq, float scale,
               const dnnl::engine& engine, std::int64_t mask_heads = 1)
      : b(batch), s(seq) {
    const dnnl::memory::desc mask_md = packed_mask_md(b, s, mask_heads);
    const dnnl::primitive_attr attr = scores_attr(scale, mask_md, true);
    const dnnl::matmul::primitive_desc pd = onednn::matmul(engine, q_md, kt_md, scores_md, attr);
    prim = dnnl::matmul(pd);
    mask = dnnl::memory(mask_md, engine);
    scratchpad = dnnl::memory(pd.scratchpad_desc(), engine);
  }

  void fill(const std::int32_t* sequence) {
    fill_packed_mask(sequence, b, s, static_cast<float*>(mask.get_data_handle()));
  }

  std::int64_t b, s;
  dnnl::matmul prim;
  dnnl::memory mask, scratchpad;
};

}  // namespace polyhal::cpu
