// Multi-head self-attention (kernel.hpp "attention") through three oneDNN
// primitives that read Q, K and V in place from the fused QKV tensor through
// strided memory descriptors (no transposes, no copies):
//   scores = (Q K^T) * 1/sqrt(d) + mask      matmul, output scale, binary add
//   probs  = softmax(scores)                 softmax_v2, f32 in, model dtype out
//   ctx    = probs V                         matmul writing [B*S, H] directly
// Only the B x heads x S x S scores are materialised (f32), never more.
#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "omp_sequence_attention.hpp"
#include "onednn_api.hpp"
#include "onednn_block_attention.hpp"
#include "onednn_matmul.hpp"
#include "onednn_packed_scores.hpp"
#include "polyhal/error.hpp"
#include "run_scratch.hpp"

namespace polyhal::cpu {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

AttentionDims attention_dims(const KernelDesc& desc) {
  const auto& attrs = desc.attrs_as<AttentionAttrs>();
  const std::int64_t h = desc.input_shapes.at(0).at(1) / 3;
  return {attrs.batch, attrs.seq, attrs.heads, h, h / attrs.heads, desc.dtype};
}

/// `convert` of `count` elements in chunks over the OpenMP pool.
void convert_in_parallel(const void* src, DType from, void* dst, DType to, std::size_t count) {
  constexpr std::size_t kChunk = std::size_t{1} << 15;
  const auto chunks = static_cast<std::int64_t>((count + kChunk - 1) / kChunk);
  const std::size_t from_size = dtype_size(from), to_size = dtype_size(to);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t first = static_cast<std::size_t>(c) * kChunk;
    convert(static_cast<const char*>(src) + first * from_size, from,
            static_cast<char*>(dst) + first * to_size, to, std::min(kChunk, count - first));
  }
}

class OneDnnAttention final : public Kernel {
 public:
  OneDnnAttention(const KernelDesc& desc, const dnnl::engine& engine, bool avx2)
      : engine_(engine),
        stream_(engine),
        blocks_(attention_dims(desc), engine, false),
        dims_(attention_dims(desc)),
        avx2_(avx2),
        f32_(desc.dtype == DType::f32),
        widened_(desc.dtype == DType::bf16 || desc.dtype == DType::f16) {
    const auto& attrs = desc.attrs_as<AttentionAttrs>();
    const std::int64_t b = attrs.batch, s = attrs.seq, heads = attrs.heads;
    const std::int64_t h = desc.input_shapes.at(0).at(1) / 3, d = h / heads;
    batch_ = b;
    seq_ = s;
    heads_ = heads;
    window_ = attrs.window;
    relative_ = desc.op == OpKind::relative_attention;
    flops_ = 4.0 * static_cast<double>(b * s * s * h);
    const auto type = onednn_type(desc.dtype);
    // Views into QKV [B*S, 3H]: element (b, head, s, c) of Q is at b*S*3H + s*3H + head*d + c.
    const dnnl::memory::desc q_md({b, heads, s, d}, type, dims{s * 3 * h, d, 3 * h, 1});
    const dnnl::memory::desc kt_md({b, heads, d, s}, type, dims{s * 3 * h, d, 1, 3 * h});
    const dnnl::memory::desc v_md({b, heads, s, d}, type, dims{s * 3 * h, d, 3 * h, 1});
    const dnnl::memory::desc scores_md({b, heads, s, s}, dt::f32, dnnl::memory::format_tag::abcd);
    const dnnl::memory::desc probs_md({b, heads, s, s}, type, dnnl::memory::format_tag::abcd);
    const dnnl::memory::desc mask_md({b, 1, 1, s}, dt::f32, dnnl::memory::format_tag::abcd);
    // Context written straight into [B*S, H]: (b, head, s, c) at b*S*H + s*H + head*d + c.
    const dnnl::memory::desc ctx_md({b, heads, s, d}, type, dims{s * h, d, h, 1});

    scores_md_ = scores_md;
    score_scale_ = 1.0f / std::sqrt(static_cast<float>(d));
    const dnnl::primitive_attr score_attr = scores_attr(score_scale_, mask_md, true);
    dnnl::primitive_attr plain;
    plain.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      scores_pd_ = onednn::matmul(engine_, q_md, kt_md, scores_md, score_attr);
      softmax_pd_ = onednn::softmax(engine_, scores_md, probs_md, 3, plain);
      context_pd_ = onednn::matmul(engine_, probs_md, v_md, ctx_md, plain);
    } catch (const dnnl::error& e) {
      throw_no_onednn_implementation(desc, e);
    }
    scores_prim_ = dnnl::matmul(scores_pd_);
    softmax_prim_ = onednn::softmax_forward(softmax_pd_);
    context_prim_ = dnnl::matmul(context_pd_);
    q_ = dnnl::memory(q_md, engine_, DNNL_MEMORY_NONE);
    kt_ = dnnl::memory(kt_md, engine_, DNNL_MEMORY_NONE);
    v_ = dnnl::memory(v_md, engine_, DNNL_MEMORY_NONE);
    ctx_ = dnnl::memory(ctx_md, engine_, DNNL_MEMORY_NONE);
    scores_ = scratch_.add(scores_md, engine_);
    probs_ = scratch_.add(probs_md, engine_);
    mask_ = dnnl::memory(mask_md, engine_);
    const auto scratch =
        std::max({scores_pd_.scratchpad_desc().get_size(), softmax_pd_.scratchpad_desc().get_size(),
                  context_pd_.scratchpad_desc().get_size()});
    scratchpad_ = dnnl::memory(dnnl::memory::desc({static_cast<std::int64_t>(scratch)}, dt::u8,
                                                  dnnl::memory::format_tag::a),
                               engine_);
    // Argument maps built once; run() rebinds pointers only.
    scores_args_ = {{DNNL_ARG_SRC, q_},
                    {DNNL_ARG_WEIGHTS, kt_},
                    {DNNL_ARG_DST, scores_},
                    {kScoresMaskArg, mask_},
                    {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    softmax_args_ = {
        {DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, probs_}, {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    context_args_ = {{DNNL_ARG_SRC, probs_},
                     {DNNL_ARG_WEIGHTS, v_},
                     {DNNL_ARG_DST, ctx_},
                     {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    implementation_ = fmt::format(
        "onednn attention [{} | {} | {}]{}", scores_pd_.impl_info_str(),
        softmax_pd_.impl_info_str(), context_pd_.impl_info_str(),
        f32_ || widened_
            ? fmt::format("; sequences on their own tokens ({}{})", avx2_ ? "avx2" : "generic",
                          widened_ ? ", in f32 from " + std::string(dtype_name(desc.dtype)) : "")
            : "");
  }

  /// relative_attention: the bias table [buckets, heads].
  void set_constants(std::span<const Tensor> constants) override {
    if (!relative_) return Kernel::set_constants(constants);
    if (constants.size() != 1 || constants[0].shape.size() != 2 ||
        constants[0].shape[1] != heads_ || constants[0].shape[0] < 1)
      throw RuntimeFailure(
          fmt::format("relative_attention: the bias must be [buckets, {}]", heads_));
    bias_.resize(static_cast<std::size_t>(constants[0].shape[0] * heads_));
    convert(constants[0].buffer->data(), constants[0].dtype, bias_.data(), DType::f32,
            bias_.size());
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    auto* base = static_cast<char*>(inputs[0].buffer->data());
    const std::size_t element = dtype_size(inputs[0].dtype);
    const std::int64_t h = inputs[0].shape[1] / 3;
    q_.set_data_handle(base);
    kt_.set_data_handle(base + static_cast<std::size_t>(h) * element);
    v_.set_data_handle(base + static_cast<std::size_t>(2 * h) * element);
    ctx_.set_data_handle(outputs[0].buffer->data());
    const auto* mask = static_cast<const std::int32_t*>(inputs[1].buffer->data());
    if (window_ > 0 || relative_) {
      const auto* buckets =
          relative_ ? static_cast<const std::int32_t*>(inputs[2].buffer->data()) : nullptr;
      return run_biased(mask, buckets);
    }
    if (f32_ || widened_) {
      // Sequences (packed, or one per row with padding): each on its own
      // tokens, no window and no padding computed. bf16 and f16 operands
      // are widened to f32 for it: oneDNN's block path below rounds each
      // sequence up to 64 tokens and calls a primitive per block, which
      // cost a packed row of sentences 3.6 times f32's attention (AMX CPU,
      // all-MiniLM-L6-v2); the conversion is two passes over QKV and ctx.
      if (const auto blocks = attention_blocks(mask, batch_, seq_)) {
        if (f32_) {
          sequence_attention_f32(static_cast<const float*>(inputs[0].buffer->data()), mask, *blocks,
                                 dims_, static_cast<float*>(outputs[0].buffer->data()), avx2_);
          return;
        }
        const auto rows = static_cast<std::size_t>(batch_ * seq_);
        const auto width = static_cast<std::size_t>(dims_.h);
        qkv_f32_.resize(rows * 3 * width);
        ctx_f32_.resize(rows * width);
        convert_in_parallel(inputs[0].buffer->data(), inputs[0].dtype, qkv_f32_.data(), DType::f32,
                            qkv_f32_.size());
        sequence_attention_f32(qkv_f32_.data(), mask, *blocks, dims_, ctx_f32_.data(), avx2_);
        convert_in_parallel(ctx_f32_.data(), DType::f32, outputs[0].buffer->data(),
                            outputs[0].dtype, ctx_f32_.size());
        return;
      }
    }
    scratch_.ensure();
    if (packed_row(mask, batch_ * seq_) &&
        blocks_.forward(base, mask, outputs[0].buffer->data(), nullptr, nullptr)) {
      return;  // each sequence's block only
    }
    if (packed_row(mask, batch_ * seq_)) {
      // Sequences packed in a row see only themselves: a [B, S, S] mask.
      if (!packed_)
        packed_.emplace(scores_md_, q_.get_desc(), kt_.get_desc(), batch_, seq_, score_scale_,
                        engine_);
      packed_->fill(mask);
      packed_->prim.execute(stream_, {{DNNL_ARG_SRC, q_},
                                      {DNNL_ARG_WEIGHTS, kt_},
                                      {DNNL_ARG_DST, scores_},
                                      {kScoresMaskArg, packed_->mask},
                                      {DNNL_ARG_SCRATCHPAD, packed_->scratchpad}});
    } else {
      // Hugging Face's additive mask: 0 where attended, the lowest f32 where not.
      auto* additive = static_cast<float*>(mask_.get_data_handle());
      for (std::int64_t i = 0; i < batch_ * seq_; ++i) additive[i] = mask[i] != 0 ? 0.0f : kMasked;
      scores_prim_.execute(stream_, {{DNNL_ARG_SRC, q_},
                                     {DNNL_ARG_WEIGHTS, kt_},
                                     {DNNL_ARG_DST, scores_},
                                     {kScoresMaskArg, mask_},
                                     {DNNL_ARG_SCRATCHPAD, scratchpad_}});
    }
    softmax_and_context();
  }

  std::string implementation() const override {
    if (window_ > 0 || relative_)
      return implementation_ + (relative_ ? "; relative-position bias" : "; sliding window") +
             " as a [B, heads, S, S] additive mask";
    return implementation_;
  }
  /// f32: the sequence path's scratch; its S x S fallback (a row without a
  /// real token, or a sequence split in two, which text inference never
  /// makes) allocates its scores when first taken, outside the plan.
  /// Other types: the scores, the probabilities and oneDNN's scratch, the
  /// block path's scratch for packed rows, and the [B, S, S] mask of the
  /// full path used when a batch has no block structure.
  std::uint64_t workspace_bytes() const override {
    if (window_ > 0 || relative_)
      return scores_.get_desc().get_size() + probs_.get_desc().get_size() +
             scratchpad_.get_desc().get_size() +
             packed_mask_md(batch_, seq_, relative_ ? heads_ : 1).get_size();
    if (f32_) return sequence_attention_bytes(dims_, omp_get_max_threads());
    // bf16, f16: also the f32 copies of QKV and ctx the sequence path works on.
    const std::uint64_t widened =
        widened_ ? sequence_attention_bytes(dims_, omp_get_max_threads()) +
                       static_cast<std::uint64_t>(batch_ * seq_ * 4 * dims_.h) * sizeof(float)
                 : 0;
    // As f32's: the S x S fallback is taken outside the plan (text
    // inference's rows always have block structure).
    if (widened_) return widened;
    return scores_.get_desc().get_size() + probs_.get_desc().get_size() +
           scratchpad_.get_desc().get_size() + blocks_.workspace_bytes() +
           packed_mask_md(batch_, seq_).get_size();
  }
  double flops() const override { return flops_; }

 private:
  /// probs = softmax(scores), then ctx = probs V, and the stream's wait.
  void softmax_and_context() {
    softmax_prim_.execute(
        stream_,
        {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, probs_}, {DNNL_ARG_SCRATCHPAD, scratchpad_}});
    context_prim_.execute(stream_, {{DNNL_ARG_SRC, probs_},
                                    {DNNL_ARG_WEIGHTS, v_},
                                    {DNNL_ARG_DST, ctx_},
                                    {DNNL_ARG_SCRATCHPAD, scratchpad_}});
    stream_.wait();
  }

  /// A sliding window or a relative-position bias: the scores' additive mask
  /// is [B, 1 or heads, S, S] (attention_allows, the window, the bias of
  /// each pair's bucket), then the usual softmax and context.
  void run_biased(const std::int32_t* mask, const std::int32_t* buckets) {
    const std::int64_t s = seq_, mask_heads = relative_ ? heads_ : 1;
    const std::int64_t bucket_count = static_cast<std::int64_t>(bias_.size()) / heads_;
    if (buckets)  // each checked before it indexes the table
      for (std::int64_t k = 0; k < batch_ * s * s; ++k)
        if (buckets[k] < 0 || buckets[k] >= bucket_count)
          throw RuntimeFailure(
              fmt::format("relative_attention: bucket {} is outside the {} of "
                          "the bias table",
                          buckets[k], bucket_count));
    scratch_.ensure();
    if (!biased_)
      biased_.emplace(scores_md_, q_.get_desc(), kt_.get_desc(), batch_, seq_, score_scale_,
                      engine_, mask_heads);
    auto* additive = static_cast<float*>(biased_->mask.get_data_handle());
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t r = 0; r < batch_; ++r)
      for (std::int64_t head = 0; head < mask_heads; ++head) {
        const std::int32_t* m = mask + r * s;
        for (std::int64_t i = 0; i < s; ++i) {
          float* row = additive + ((r * mask_heads + head) * s + i) * s;
          const std::int32_t* bucket = buckets ? buckets + (r * s + i) * s : nullptr;
          for (std::int64_t j = 0; j < s; ++j) {
            const bool far = window_ > 0 && (i > j ? i - j : j - i) > window_;
            row[j] =
                far || !attention_allows(m[i], m[j])
                    ? kMasked
                    : (bucket ? bias_[static_cast<std::size_t>(bucket[j] * heads_ + head)] : 0.0f);
          }
        }
      }
    biased_->prim.execute(stream_, {{DNNL_ARG_SRC, q_},
                                    {DNNL_ARG_WEIGHTS, kt_},
                                    {DNNL_ARG_DST, scores_},
                                    {kScoresMaskArg, biased_->mask},
                                    {DNNL_ARG_SCRATCHPAD, biased_->scratchpad}});
    softmax_and_context();
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc scores_pd_, context_pd_;
  onednn::softmax_forward::primitive_desc softmax_pd_;
  dnnl::matmul scores_prim_, context_prim_;
  onednn::softmax_forward softmax_prim_;
  dnnl::memory q_, kt_, v_, ctx_, scores_, probs_, mask_, scratchpad_;
  RunScratch scratch_;  // scores_ and probs_
  dnnl::memory::desc scores_md_;
  float score_scale_ = 1.0f;
  std::optional<PackedScores> packed_;  // made at the first packed batch without blocks
  std::optional<PackedScores> biased_;  // a window or a relative bias: made at the first batch
  std::vector<float> bias_;             // relative_attention's table [buckets, heads]
  std::int64_t heads_ = 0, window_ = 0;
  bool relative_ = false;
  BlockAttention blocks_;  // packed rows, block by block
  AttentionDims dims_;
  bool avx2_ = false;     // sequence_attention_f32 may use AVX2 and FMA
  bool f32_ = false;      // f32 operands: sequence_attention_f32 for block-structured masks
  bool widened_ = false;  // bf16, f16 operands: the same, on f32 copies
  std::vector<float> qkv_f32_, ctx_f32_;  // widened_: made at the first block-structured batch
  std::unordered_map<int, dnnl::memory> scores_args_, softmax_args_, context_args_;
  std::int64_t batch_ = 0, seq_ = 0;
  double flops_ = 0;
  std::string implementation_;
};

/// LayerNorm (optionally of X + R) through oneDNN: a binary add into an owned
/// buffer when there is a residual, then layer_normalization with f32 scale
/// and shift.
class OneDnnLayerNorm final : public Kernel {
 public:
  OneDnnLayerNorm(const KernelDesc& desc, const dnnl::engine& engine)
      : engine_(engine), stream_(engine) {
    const std::int64_t rows = desc.input_shapes.at(0).at(0), width = desc.input_shapes.at(0).at(1);
    width_ = width;
    const dnnl::memory::desc data_md({rows, width}, onednn_type(desc.dtype),
                                     dnnl::memory::format_tag::ab);
    const float eps = static_cast<float>(desc.attrs_as<LayerNormAttrs>().eps);
    residual_ = desc.attrs_as<LayerNormAttrs>().residual;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      norm_pd_ = onednn::layer_normalization(
          engine_, dnnl::prop_kind::forward_inference, data_md, eps,
          dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift, attr);
      if (residual_) {
        add_pd_ = onednn::binary(engine_, dnnl::algorithm::binary_add, data_md, data_md, data_md);
        add_prim_ = dnnl::binary(add_pd_);
        sum_ = scratch_.add(data_md, engine_);
      }
    } catch (const dnnl::error& e) {
      throw_no_onednn_implementation(desc, e);
    }
    norm_prim_ = dnnl::layer_normalization_forward(norm_pd_);
    src_ = dnnl::memory(data_md, engine_, DNNL_MEMORY_NONE);
    residual_mem_ = dnnl::memory(data_md, engine_, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(data_md, engine_, DNNL_MEMORY_NONE);
    scratchpad_ = dnnl::memory(norm_pd_.scratchpad_desc(), engine_);
  }

  void set_constants(std::span<const Tensor> constants) override {
    if (constants.size() != 2 || constants[0].dtype != DType::f32 ||
        constants[0].numel() != width_) {
      throw RuntimeFailure(
          fmt::format("layernorm: constants must be f32 gamma[{}] and beta[{}]", width_, width_));
    }
    const dnnl::memory::desc md({width_}, dt::f32, dnnl::memory::format_tag::a);
    constants_.assign(constants.begin(), constants.end());
    scale_ = dnnl::memory(md, engine_, constants_[0].buffer->data());
    shift_ = dnnl::memory(md, engine_, constants_[1].buffer->data());
    norm_args_ = {{DNNL_ARG_SRC, residual_ ? sum_ : src_},
                  {DNNL_ARG_DST, dst_},
                  {DNNL_ARG_SCALE, scale_},
                  {DNNL_ARG_SHIFT, shift_},
                  {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    if (residual_)
      add_args_ = {{DNNL_ARG_SRC_0, src_}, {DNNL_ARG_SRC_1, residual_mem_}, {DNNL_ARG_DST, sum_}};
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    scratch_.ensure();
    src_.set_data_handle(inputs[0].buffer->data());
    dst_.set_data_handle(outputs[0].buffer->data());
    dnnl::memory normalised_input = src_;
    if (residual_) {
      residual_mem_.set_data_handle(inputs[1].buffer->data());
      add_prim_.execute(
          stream_, {{DNNL_ARG_SRC_0, src_}, {DNNL_ARG_SRC_1, residual_mem_}, {DNNL_ARG_DST, sum_}});
      normalised_input = sum_;
    }
    norm_prim_.execute(stream_, {{DNNL_ARG_SRC, normalised_input},
                                 {DNNL_ARG_DST, dst_},
                                 {DNNL_ARG_SCALE, scale_},
                                 {DNNL_ARG_SHIFT, shift_},
                                 {DNNL_ARG_SCRATCHPAD, scratchpad_}});
    stream_.wait();
  }

  std::string implementation() const override {
    return fmt::format("onednn layernorm {}", norm_pd_.impl_info_str());
  }
  /// The residual sum and oneDNN's scratch.
  std::uint64_t workspace_bytes() const override {
    return scratch_.bytes() + scratchpad_.get_desc().get_size();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::layer_normalization_forward::primitive_desc norm_pd_;
  dnnl::layer_normalization_forward norm_prim_;
  dnnl::binary::primitive_desc add_pd_;
  dnnl::binary add_prim_;
  dnnl::memory src_, residual_mem_, dst_, sum_, scale_, shift_, scratchpad_;
  RunScratch scratch_;             // sum_
  std::vector<Tensor> constants_;  // keep gamma and beta alive
  std::unordered_map<int, dnnl::memory> norm_args_, add_args_;
  std::int64_t width_ = 0;
  bool residual_ = false;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_attention(const KernelDesc& desc, const dnnl::engine& engine,
                                              bool avx2) {
  return std::make_unique<OneDnnAttention>(desc, engine, avx2);
}

std::unique_ptr<Kernel> make_onednn_layernorm(const KernelDesc& desc, const dnnl::engine& engine) {
  return std::make_unique<OneDnnLayerNorm>(desc, engine);
}

}  // namespace polyhal::cpu
