// Training attention on the CPU (train_kernels.hpp "attention_train" and
// "attention_backward"): every product is a batched oneDNN matmul over
// (batch, head) that reads Q, K, V, dctx and the probabilities in place
// through strided memory descriptors and writes its third of dQKV directly.
//   forward:  probs = softmax(Q K^T / sqrt(d) + mask);  ctx = probs V
//   backward: dV = P^T dctx;  dP = dctx V^T;  dS = P (dP - rowsum(P dP)) / sqrt(d)
//             dQ = dS K;  dK = dS^T Q
// With round_to=bf16 QKV, ctx, probs, dctx and dQKV are bf16 tensors
// (operand_types) read and written in place; the scores, their softmax and
// dP are f32 scratch, rounded to bf16 where they leave the kernel or feed a
// GEMM. With attention dropout the kept probabilities P*M feed the V
// products and dP is masked the same way; the mask M is regenerated from
// (rng, stream) in backward, never stored.
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

#include "omp_convert.hpp"
#include "omp_dropout.hpp"
#include "onednn_api.hpp"
#include "onednn_block_attention.hpp"
#include "onednn_gemm.hpp"
#include "onednn_matmul.hpp"
#include "onednn_packed_scores.hpp"
#include "polyhal/dropout_mask.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// A batched product writing f32, refused (not thrown) when oneDNN has none.
Gemm batched_product(const KernelDesc& desc, const dnnl::engine& engine,
                     const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                     const dnnl::memory::desc& c) {
  return create_or_refuse(desc, [&] { return Gemm(engine, a, b, c, false); });
}

/// P * M, the kept probabilities, as a GEMM operand: bf16 or f32 scratch
/// filled from probabilities stored in that type.
class KeptProbabilities {
 public:
  KeptProbabilities(DType type, std::int64_t count, bool avx512)
      : count_(count),
        avx512_(avx512),
        size_(static_cast<std::size_t>(count) * (type == DType::bf16 ? 2 : 4)) {}
  /// What it holds once used (it allocates at its first use, not at prepare).
  std::uint64_t bytes() const { return size_; }
  const void* of(const Tensor& probs, const DropoutMask& mask) {
    if (bytes_.size() != size_) bytes_.resize(size_);
    constexpr std::int64_t kChunk = 4096;
    const std::int64_t chunks = (count_ + kChunk - 1) / kChunk;
    const bool bf16 = probs.dtype == DType::bf16;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t begin = c * kChunk, n = std::min(kChunk, count_ - begin);
      const auto first = static_cast<std::uint64_t>(begin);
      if (bf16) {
        apply_dropout_bf16(mask, first, probs.data<std::uint16_t>() + begin,
                           reinterpret_cast<std::uint16_t*>(bytes_.data()) + begin, n, avx512_);
      } else {
        apply_dropout(mask, first, probs.data<float>() + begin,
                      reinterpret_cast<float*>(bytes_.data()) + begin, n, avx512_);
      }
    }
    return bytes_.data();
  }

 private:
  std::int64_t count_;
  bool avx512_;
  std::size_t size_;
  std::vector<std::byte> bytes_;
};

/// Shapes and the strided views every attention GEMM uses.
struct Views {
  std::int64_t b, s, heads, h, d;
  DType type;
  double dropout;  // attention-probability dropout (0: off)
  std::uint64_t stream;
  Views(const KernelDesc& desc, std::size_t qkv_input)
      : b(desc.attrs_as<AttentionAttrs>().batch),
        s(desc.attrs_as<AttentionAttrs>().seq),
        heads(desc.attrs_as<AttentionAttrs>().heads),
        h(desc.input_shapes.at(qkv_input).at(1) / 3),
        d(h / heads),
        type(round_type(desc)),
        dropout(desc.attrs_as<AttentionAttrs>().dropout),
        stream(desc.attrs_as<AttentionAttrs>().stream) {}
  /// The probabilities' mask when dropout is on; `rng` is the input after
  /// the op's usual ones.
  std::optional<DropoutMask> mask(std::span<const Tensor> in, std::size_t rng_input) const {
    if (dropout <= 0.0) return std::nullopt;
    return DropoutMask(in[rng_input].data<std::int32_t>(), stream, dropout);
  }
  std::int64_t tokens() const { return b * s; }
  std::int64_t score_count() const { return b * heads * s * s; }
  /// Q, K or V (rows of QKV [B*S, 3H], columns head*d..): (b, head, s, c).
  dnnl::memory::desc qkv_part(dt type_of) const {
    return {{b, heads, s, d}, type_of, dims{s * 3 * h, d, 3 * h, 1}};
  }
  /// K or V transposed: (b, head, c, s).
  dnnl::memory::desc qkv_part_t(dt type_of) const {
    return {{b, heads, d, s}, type_of, dims{s * 3 * h, d, 1, 3 * h}};
  }
  /// ctx / dctx [B*S, H] as (b, head, s, c).
  dnnl::memory::desc context(dt type_of) const {
    return {{b, heads, s, d}, type_of, dims{s * h, d, h, 1}};
  }
  /// Scores-shaped [B, heads, S, S], plain or transposed in its last two dims.
  dnnl::memory::desc scores(dt type_of) const { return {{b, heads, s, s}, type_of, tag::abcd}; }
  dnnl::memory::desc scores_t(dt type_of) const {
    return {{b, heads, s, s}, type_of, dims{heads * s * s, s * s, 1, s}};
  }
  dt operand() const { return operand_type(type); }
  AttentionDims shape() const { return {b, s, heads, h, d, type}; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(d)); }
};

class OneDnnAttentionTrain final : public Kernel {
 public:
  OneDnnAttentionTrain(const KernelDesc& desc, bool avx512, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        v_(desc, 0),
        engine_(engine),
        stream_(engine),
        scores_(create_or_refuse(
            desc,
            [&] {
              const dnnl::primitive_attr attr = scores_attr(v_.scale(), mask_md(), false);
              return Gemm(engine, v_.qkv_part(v_.operand()), v_.qkv_part_t(v_.operand()),
                          v_.scores(dt::f32), false, false, attr);
            })),
        context_(batched_product(desc, engine, v_.scores(v_.operand()), v_.qkv_part(v_.operand()),
                                 v_.context(v_.operand()))),
        softmax_pd_(create_or_refuse(
            desc,
            [&] { return onednn::softmax(engine, v_.scores(dt::f32), v_.scores(dt::f32), 3); })),
        softmax_(softmax_pd_),
        mask_(mask_md(), engine),
        probs_mem_(v_.scores(dt::f32), engine, DNNL_MEMORY_NONE),
        kept_(v_.type, v_.dropout > 0.0 ? v_.score_count() : 0, avx512),
        blocks_(v_.shape(), engine, avx512) {}

  /// in: QKV (stored at round_to), mask (i32) [, rng] -> ctx, probs (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const auto* qkv = static_cast<const char*>(in[0].buffer->data());
    const auto third = static_cast<std::size_t>(v_.h) * dtype_size(in[0].dtype);
    const auto* mask = in[1].data<std::int32_t>();
    // Scores and softmax in f32: the output itself in f32, else scratch.
    const bool bf16 = v_.type == DType::bf16;
    // Allocated at the first run, not at prepare (planning allocates nothing).
    if (bf16 && scores_f32_.empty()) scores_f32_.resize(scores_f32_size());
    float* scores = bf16 ? scores_f32_.data() : out[1].data<float>();
    const auto mask_of_probs = v_.mask(in, 2);
    if (packed_row(mask, v_.tokens()) &&
        blocks_.forward(qkv, mask, out[0].buffer->data(), out[1].buffer->data(),
                        mask_of_probs ? &*mask_of_probs : nullptr)) {
      return;  // each sequence's block only
    }
    if (packed_row(mask, v_.tokens())) {
      // Sequences packed in a row see only themselves: a [B, S, S] mask.
      if (!packed_scores_) {
        packed_scores_.emplace(create_or_refuse(desc_, [&] {
          const dnnl::primitive_attr attr =
              scores_attr(v_.scale(), packed_mask_md(v_.b, v_.s), false);
          return Gemm(engine_, v_.qkv_part(v_.operand()), v_.qkv_part_t(v_.operand()),
                      v_.scores(dt::f32), false, false, attr);
        }));
        packed_mask_ = dnnl::memory(packed_mask_md(v_.b, v_.s), engine_);
      }
      fill_packed_mask(mask, v_.b, v_.s, static_cast<float*>(packed_mask_.get_data_handle()));
      packed_scores_->run(stream_, qkv, qkv + third, scores, {{kScoresMaskArg, packed_mask_}});
    } else {
      // Hugging Face's additive mask: 0 where attended, the lowest f32 where not.
      auto* additive = static_cast<float*>(mask_.get_data_handle());
      for (std::int64_t i = 0; i < v_.tokens(); ++i) additive[i] = mask[i] != 0 ? 0.0f : kMasked;
      scores_.run(stream_, qkv, qkv + third, scores, {{kScoresMaskArg, mask_}});
    }
    probs_mem_.set_data_handle(scores);
    softmax_.execute(stream_, {{DNNL_ARG_SRC, probs_mem_}, {DNNL_ARG_DST, probs_mem_}});
    stream_.wait();
    if (bf16) to_bf16(scores, out[1].data<std::uint16_t>(), v_.score_count());
    const void* p = mask_of_probs ? kept_.of(out[1], *mask_of_probs) : out[1].buffer->data();
    context_.run(stream_, p, qkv + 2 * third, out[0].buffer->data());
    stream_.wait();
  }
  std::string implementation() const override {
    return fmt::format("onednn attention_train [{} | {} | {}]", scores_.pd.impl_info_str(),
                       softmax_pd_.impl_info_str(), context_.pd.impl_info_str());
  }
  double flops() const override { return 4.0 * static_cast<double>(v_.b * v_.s * v_.s * v_.h); }
  /// What run() allocates: the f32 scores (bf16), the kept probabilities
  /// (dropout), the block path's scratch and the packed rows' [B, S, S] mask.
  std::uint64_t workspace_bytes() const override {
    return scores_f32_size() * sizeof(float) + kept_.bytes() + blocks_.workspace_bytes() +
           packed_mask_md(v_.b, v_.s).get_size();
  }

 private:
  std::size_t scores_f32_size() const {
    return v_.type == DType::bf16 ? static_cast<std::size_t>(v_.score_count()) : 0;
  }
  dnnl::memory::desc mask_md() const { return {{v_.b, 1, 1, v_.s}, dt::f32, tag::abcd}; }
  KernelDesc desc_;
  OperandTypes types_;
  Views v_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  Gemm scores_, context_;
  onednn::softmax_forward::primitive_desc softmax_pd_;
  onednn::softmax_forward softmax_;
  dnnl::memory mask_, probs_mem_;
  std::optional<Gemm> packed_scores_;  // made at the first packed batch
  dnnl::memory packed_mask_;
  std::vector<float> scores_f32_;  // bf16 only: the softmax before rounding
  KeptProbabilities kept_;
  BlockAttention blocks_;  // packed rows
};

class OneDnnAttentionBackward final : public Kernel {
 public:
  OneDnnAttentionBackward(const KernelDesc& desc, bool avx512, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        v_(desc, 1),
        stream_(engine),
        // dV = P^T dctx
        dv_(batched_product(desc, engine, v_.scores_t(v_.operand()), v_.context(v_.operand()),
                            v_.qkv_part(v_.operand()))),
        // dP = dctx V^T
        dp_(batched_product(desc, engine, v_.context(v_.operand()), v_.qkv_part_t(v_.operand()),
                            v_.scores(dt::f32))),
        // dQ = dS K
        dq_(batched_product(desc, engine, v_.scores(v_.operand()), v_.qkv_part(v_.operand()),
                            v_.qkv_part(v_.operand()))),
        // dK = dS^T Q
        dk_(batched_product(desc, engine, v_.scores_t(v_.operand()), v_.qkv_part(v_.operand()),
                            v_.qkv_part(v_.operand()))),
        kept_(v_.type, v_.dropout > 0.0 ? v_.score_count() : 0, avx512),
        avx512_(avx512),
        ds_(v_.type, v_.score_count()),
        blocks_(v_.shape(), engine, avx512) {}

  /// in: dctx, QKV, probs (stored at round_to) [, rng], mask -> dQKV (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const void* dctx = in[0].buffer->data();
    const auto* qkv = static_cast<const char*>(in[1].buffer->data());
    const auto mask = v_.mask(in, 3);
    const std::size_t mask_input = mask ? 4 : 3;
    if (in.size() > mask_input) {
      const auto* sequences = in[mask_input].data<std::int32_t>();
      if (packed_row(sequences, v_.tokens()) &&
          blocks_.backward(dctx, qkv, in[2].buffer->data(), sequences, out[0].buffer->data(),
                           mask ? &*mask : nullptr)) {
        return;  // each sequence's block only
      }
    }
    const void* p = mask ? kept_.of(in[2], *mask) : in[2].buffer->data();
    const auto third = static_cast<std::size_t>(v_.h) * dtype_size(in[1].dtype);
    auto* dqkv = static_cast<char*>(out[0].buffer->data());
    if (dscores_.empty()) dscores_.resize(static_cast<std::size_t>(v_.score_count()));
    float* dp = dscores_.data();
    dv_.run(stream_, p, dctx, dqkv + 2 * third);
    dp_.run(stream_, dctx, qkv + 2 * third, dp);
    stream_.wait();
    if (in[2].dtype == DType::bf16) {
      softmax_backward(in[2].data<std::uint16_t>(), mask ? &*mask : nullptr, dp);
    } else {
      softmax_backward(in[2].data<float>(), mask ? &*mask : nullptr, dp);
    }
    const void* ds = ds_.of(dp);
    dq_.run(stream_, ds, qkv + third, dqkv);
    dk_.run(stream_, ds, qkv, dqkv + third);
    stream_.wait();
  }
  std::string implementation() const override {
    return fmt::format("onednn attention_backward {}", dp_.pd.impl_info_str());
  }
  double flops() const override { return 8.0 * static_cast<double>(v_.b * v_.s * v_.s * v_.h); }
  /// What run() allocates: dP / dS, the kept probabilities (dropout) and the
  /// block path's scratch.
  std::uint64_t workspace_bytes() const override {
    return static_cast<std::uint64_t>(v_.score_count()) * sizeof(float) + kept_.bytes() +
           blocks_.workspace_bytes();
  }

 private:
  /// dP -> dS in place, row by row: dS = P (dP - sum_j P dP) / sqrt(d),
  /// with dP = M dP first when the probabilities were dropped.
  template <class T>
  void softmax_backward(const T* probs, const DropoutMask* mask, float* dp) const {
    const std::int64_t rows = v_.b * v_.heads * v_.s, s = v_.s;
    const float scale = v_.scale();
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* pr = probs + r * s;
      float* g = dp + r * s;
      if (mask) apply_dropout(*mask, static_cast<std::uint64_t>(r * s), g, g, s, avx512_);
      double weighted = 0;  // rows of dS sum to 0: keep the cancellation accurate
      for (std::int64_t j = 0; j < s; ++j) weighted += static_cast<double>(load_f32(pr, j)) * g[j];
      for (std::int64_t j = 0; j < s; ++j)
        g[j] = static_cast<float>(load_f32(pr, j) * (g[j] - weighted)) * scale;
    }
  }
  KernelDesc desc_;
  OperandTypes types_;
  Views v_;
  dnnl::stream stream_;
  Gemm dv_, dp_, dq_, dk_;
  std::vector<float> dscores_;
  KeptProbabilities kept_;
  bool avx512_;
  Operand ds_;
  BlockAttention blocks_;  // packed rows
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_attention_train(const KernelDesc& desc, bool avx512,
                                                    const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnAttentionTrain>(desc, avx512, engine);
}

std::unique_ptr<Kernel> make_onednn_attention_backward(const KernelDesc& desc, bool avx512,
                                                       const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnAttentionBackward>(desc, avx512, engine);
}

}  // namespace polyhal::cpu
