// Reference kernels for the BERT ops (see kernel.hpp for each contract):
// f32 math, oneTBB-parallel, outputs rounded once to the output dtype.
// Scratch is sized at prepare and allocated on first use, never per run.
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reference_gemm.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"
#include "polyhal/reference_kernels.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {
namespace {

std::size_t size_of(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

void require_shape(const KernelDesc& desc, std::size_t index, std::size_t rank) {
  if (desc.input_shapes.size() <= index || desc.input_shapes[index].size() != rank) {
    throw RuntimeFailure(
        fmt::format("{}: input {} must have rank {}", desc.to_string(), index, rank));
  }
}

float gelu_erf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

/// Y = act(X W^T + b). W is transposed to [K, N] f32 once, in set_constants.
class ReferenceLinear final : public Kernel {
 public:
  ReferenceLinear(const KernelDesc& desc, MatMulNumerics numerics)
      : desc_(desc), numerics_(numerics) {
    require_shape(desc, 0, 2);
    m_ = desc.input_shapes[0][0];
    k_ = desc.input_shapes[0][1];
    const auto& attrs = desc.attrs_as<LinearAttrs>();
    n_ = attrs.out_features;
    activation_ = attrs.activation;
    residual_ = attrs.residual;
    math_ = attrs.math;
    input_scale_ = attrs.input_scale;
    gelu_input_u8_ = math_ == LinearMath::int8 && input_scale_ == 0.0f &&
                     attrs.input_activation == Activation::gelu;
    if (math_ == LinearMath::int8 && !(input_scale_ >= 0.0f && std::isfinite(input_scale_)))
      throw RuntimeFailure(fmt::format("{}: int8 input_scale must be finite and >= 0, got {}",
                                       desc_.to_string(), input_scale_));
  }

  void set_constants(std::span<const Tensor> constants) override {
    const bool smoothed = constants.size() == 3 && math_ == LinearMath::int8 &&
                          input_scale_ == 0.0f && !gelu_input_u8_;
    if ((constants.size() != 2 && !smoothed) || constants[0].shape != Shape{n_, k_} ||
        constants[1].numel() != n_) {
      throw RuntimeFailure(fmt::format(
          "{}: constants must be W[{}, {}] and b[{}] (and s[{}] for a dynamic s8 int8 linear)",
          desc_.to_string(), n_, k_, n_, k_));
    }
    std::vector<float> w(size_of(n_ * k_));
    convert(constants[0].buffer->data(), constants[0].dtype, w.data(), DType::f32, w.size());
    inverse_smoothing_.clear();
    if (smoothed) {
      std::vector<float> smoothing(size_of(k_));
      if (constants[2].numel() != k_)
        throw RuntimeFailure(fmt::format("{}: smoothing must hold K values", desc_.to_string()));
      convert(constants[2].buffer->data(), constants[2].dtype, smoothing.data(), DType::f32,
              smoothing.size());
      if (const std::string problem = int8_smoothing_problem(smoothing, k_); !problem.empty())
        throw RuntimeFailure(fmt::format("{}: {}", desc_.to_string(), problem));
      smooth_weights(w, n_, k_, smoothing);
      for (const float v : smoothing) inverse_smoothing_.push_back(1.0f / v);
    }
    if (math_ == LinearMath::int8) {
      // The int8 weights stand in for W as exact small integers.
      std::vector<std::int8_t> q(w.size());
      weight_step_.resize(size_of(n_));
      quantize_weights_per_channel(w, n_, k_, q, weight_step_);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = q[i];
    } else if (const auto narrow = rounded_type()) {
      for (float& v : w) v = round_through(*narrow, v);
    }
    weight_t_.resize(w.size());
    for (std::int64_t n = 0; n < n_; ++n) {
      for (std::int64_t k = 0; k < k_; ++k) weight_t_[size_of(k * n_ + n)] = w[size_of(n * k_ + k)];
    }
    bias_.resize(size_of(n_));
    convert(constants[1].buffer->data(), constants[1].dtype, bias_.data(), DType::f32,
            bias_.size());
    if (gelu_input_u8_) subtract_gelu_shift(weight_t_, n_, k_, weight_step_, bias_, true);
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    if (weight_t_.empty()) throw RuntimeFailure(desc_.to_string() + ": run before set_constants");
    x_.resize(size_of(m_ * k_));
    y_.resize(size_of(m_ * n_));
    convert(inputs[0].buffer->data(), inputs[0].dtype, x_.data(), DType::f32, x_.size());
    if (residual_) {
      residual_values_.resize(y_.size());
      convert(inputs[1].buffer->data(), inputs[1].dtype, residual_values_.data(), DType::f32,
              y_.size());
    }
    if (math_ == LinearMath::int8) {
      int8_gemm();
    } else {
      if (const auto narrow = rounded_type())
        for (float& v : x_) v = round_through(*narrow, v);
      detail::reference_gemm(x_.data(), weight_t_.data(), y_.data(), size_of(m_), size_of(n_),
                             size_of(k_), numerics_.accumulate == DType::f16);
    }
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, size_of(m_)), [&](const auto& rows) {
      for (std::size_t i = rows.begin(); i < rows.end(); ++i) {
        float* row = y_.data() + i * size_of(n_);
        for (std::size_t j = 0; j < size_of(n_); ++j) {
          const float v = row[j] + bias_[j];
          row[j] = activation_ == Activation::gelu   ? gelu_erf(v)
                   : activation_ == Activation::tanh ? std::tanh(v)
                   : activation_ == Activation::relu ? std::max(v, 0.0f)
                                                     : v;
          if (residual_) row[j] += residual_values_[i * size_of(n_) + j];
        }
      }
    });
    detail::store_rounded(y_.data(), outputs[0].buffer->data(), outputs[0].dtype, y_.size(),
                          numerics_, runs_++);
  }

  std::string implementation() const override {
    return fmt::format("reference linear {} {} products accumulate {} activation {}",
                       dtype_name(desc_.dtype), linear_math_name(math_),
                       math_ == LinearMath::int8 ? "s32" : dtype_name(numerics_.accumulate),
                       activation_name(activation_));
  }
  std::uint64_t workspace_bytes() const override {
    return static_cast<std::uint64_t>(m_ * k_ + m_ * n_ + k_ * n_ + n_) * sizeof(float);
  }
  double flops() const override {
    return 2.0 * static_cast<double>(m_ * n_) * static_cast<double>(k_);
  }

 private:
  /// The type X and W are rounded to for bf16/f16 products, if any.
  std::optional<DType> rounded_type() const {
    if (math_ == LinearMath::bf16_products) return DType::bf16;
    if (math_ == LinearMath::f16_products) return DType::f16;
    return std::nullopt;
  }
  KernelDesc desc_;
  MatMulNumerics numerics_;
  std::int64_t m_ = 0, n_ = 0, k_ = 0;
  Activation activation_ = Activation::none;
  bool residual_ = false;
  LinearMath math_ = LinearMath::native;
  float input_scale_ = 0.0f;
  std::vector<float> weight_t_, bias_, x_, y_, residual_values_, weight_step_, row_step_;
  std::vector<float> inverse_smoothing_;  ///< 1 / s[k] of a smoothed int8 linear, else empty
  std::vector<std::int8_t> x_s8_;
  std::vector<std::uint8_t> x_u8_;
  std::vector<std::int32_t> x_q_;
  bool gelu_input_u8_ = false;
  std::uint64_t runs_ = 0;

  /// y_ = dequantised s32 products of the quantised x_ and the int8 weights
  /// (held as exact small integers in weight_t_).
  void int8_gemm() {
    x_s8_.resize(x_.size());
    x_u8_.resize(x_.size());
    row_step_.assign(size_of(m_), input_scale_);
    const std::size_t k = size_of(k_);
    for (std::size_t i = 0; i < size_of(m_); ++i) {
      const std::span<const float> row(x_.data() + i * k, k);
      const std::span<std::int8_t> q(x_s8_.data() + i * k, k);
      if (input_scale_ > 0.0f) {
        for (std::size_t j = 0; j < k; ++j) q[j] = quantize_s8(row[j], 1.0f / input_scale_);
      } else if (gelu_input_u8_) {
        row_step_[i] = quantize_gelu_row_u8(row, std::span(x_u8_.data() + i * k, k));
      } else if (!inverse_smoothing_.empty()) {
        std::vector<float> smoothed(row.begin(), row.end());
        for (std::size_t j = 0; j < k; ++j) smoothed[j] *= inverse_smoothing_[j];
        row_step_[i] = quantize_row_s8(smoothed, q);
      } else {
        row_step_[i] = quantize_row_s8(row, q);
      }
    }
    x_q_.resize(x_.size());
    for (std::size_t i = 0; i < x_.size(); ++i) x_q_[i] = gelu_input_u8_ ? x_u8_[i] : x_s8_[i];
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, size_of(m_)), [&](const auto& rows) {
      std::vector<std::int32_t> acc(size_of(n_));
      for (std::size_t i = rows.begin(); i < rows.end(); ++i) {
        std::fill(acc.begin(), acc.end(), 0);
        for (std::size_t kk = 0; kk < size_of(k_); ++kk) {
          const std::int32_t a = x_q_[i * size_of(k_) + kk];
          if (a == 0) continue;
          const float* w = weight_t_.data() + kk * size_of(n_);
          for (std::size_t j = 0; j < size_of(n_); ++j)
            acc[j] += a * static_cast<std::int32_t>(w[j]);
        }
        for (std::size_t j = 0; j < size_of(n_); ++j)
          y_[i * size_of(n_) + j] =
              input_scale_ > 0.0f ? static_cast<float>(acc[j]) * (input_scale_ * weight_step_[j])
                                  : static_cast<float>(acc[j]) * weight_step_[j] * row_step_[i];
      }
    });
  }
};

/// LayerNorm over the last dimension, optionally of X + R.
class ReferenceLayerNorm final : public Kernel {
 public:
  explicit ReferenceLayerNorm(const KernelDesc& desc) : desc_(desc) {
    require_shape(desc, 0, 2);
    rows_ = desc.input_shapes[0][0];
    width_ = desc.input_shapes[0][1];
    residual_ = desc.attrs_as<LayerNormAttrs>().residual;
    eps_ = desc.attrs_as<LayerNormAttrs>().eps;
  }

  void set_constants(std::span<const Tensor> constants) override {
    if (constants.size() != 2 || constants[0].numel() != width_ || constants[1].numel() != width_) {
      throw RuntimeFailure(fmt::format("{}: constants must be gamma[{}] and beta[{}]",
                                       desc_.to_string(), width_, width_));
    }
    gamma_.resize(size_of(width_));
    beta_.resize(size_of(width_));
    convert(constants[0].buffer->data(), constants[0].dtype, gamma_.data(), DType::f32,
            gamma_.size());
    convert(constants[1].buffer->data(), constants[1].dtype, beta_.data(), DType::f32,
            beta_.size());
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    const std::size_t w = size_of(width_);
    const DType type = inputs[0].dtype;
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, size_of(rows_)), [&](const auto& rows) {
      std::vector<float> x(w), r(w);
      for (std::size_t i = rows.begin(); i < rows.end(); ++i) {
        detail_load(inputs[0], i * w, w, x.data());
        if (residual_) {
          detail_load(inputs[1], i * w, w, r.data());
          // The sum is an activation of its own in the model's dtype.
          for (std::size_t j = 0; j < w; ++j) x[j] = round_through(type, x[j] + r[j]);
        }
        double mean = 0.0;
        for (float v : x) mean += v;
        mean /= static_cast<double>(w);
        double variance = 0.0;
        for (float v : x) variance += (v - mean) * (v - mean);
        variance /= static_cast<double>(w);
        const double scale = 1.0 / std::sqrt(variance + eps_);
        for (std::size_t j = 0; j < w; ++j) {
          x[j] = static_cast<float>((x[j] - mean) * scale) * gamma_[j] + beta_[j];
        }
        convert(
            x.data(), DType::f32,
            static_cast<char*>(outputs[0].buffer->data()) + i * w * dtype_size(outputs[0].dtype),
            outputs[0].dtype, w);
      }
    });
  }

  std::string implementation() const override {
    return fmt::format("reference layernorm {}{}", dtype_name(desc_.dtype),
                       residual_ ? " +residual" : "");
  }

 private:
  static void detail_load(const Tensor& t, std::size_t offset, std::size_t count, float* out) {
    convert(static_cast<const char*>(t.buffer->data()) + offset * dtype_size(t.dtype), t.dtype, out,
            DType::f32, count);
  }
  KernelDesc desc_;
  std::int64_t rows_ = 0, width_ = 0;
  bool residual_ = false;
  double eps_ = 1e-12;
  std::vector<float> gamma_, beta_;
};

/// Multi-head self-attention from a fused QKV tensor. One query row at a
/// time: scores for that row only (S floats), never the S x S matrix.
/// attention, and relative_attention: the scores plus bias[bucket][head].
class ReferenceAttention final : public Kernel {
 public:
  explicit ReferenceAttention(const KernelDesc& desc)
      : desc_(desc), relative_(desc.op == OpKind::relative_attention) {
    const auto& attrs = desc.attrs_as<AttentionAttrs>();
    batch_ = attrs.batch;
    seq_ = attrs.seq;
    heads_ = attrs.heads;
    window_ = attrs.window;
    require_shape(desc, 0, 2);
    hidden_ = desc.input_shapes[0][1] / 3;
    if (desc.input_shapes[0][0] != batch_ * seq_ || hidden_ % heads_ != 0) {
      throw RuntimeFailure(
          fmt::format("{}: QKV must be [batch*seq, 3*hidden] with hidden divisible by heads",
                      desc.to_string()));
    }
  }

  void set_constants(std::span<const Tensor> constants) override {
    if (!relative_) return;
    if (constants.size() != 1 || constants[0].shape.size() != 2 ||
        constants[0].shape[1] != heads_ || constants[0].shape[0] < 1)
      throw RuntimeFailure(
          fmt::format("{}: the bias must be [buckets, {}]", desc_.to_string(), heads_));
    bias_.resize(size_of(constants[0].shape[0] * heads_));
    convert(constants[0].buffer->data(), constants[0].dtype, bias_.data(), DType::f32,
            bias_.size());
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    const std::size_t s = size_of(seq_), h = size_of(hidden_), d = h / size_of(heads_);
    const auto* buckets =
        relative_ ? static_cast<const std::int32_t*>(inputs[2].buffer->data()) : nullptr;
    const std::size_t bucket_count = bias_.size() / size_of(heads_);
    if (buckets)  // checked before any is read: an index into the table
      for (std::size_t n = 0; n < size_of(batch_) * s * s; ++n)
        if (buckets[n] < 0 || static_cast<std::size_t>(buckets[n]) >= bucket_count)
          throw RuntimeFailure(fmt::format("{}: bucket {} is outside the {} of the bias table",
                                           desc_.to_string(), buckets[n], bucket_count));
    const DType type = inputs[0].dtype;
    qkv_.resize(size_of(batch_ * seq_) * 3 * h);
    context_.resize(size_of(batch_ * seq_) * h);
    convert(inputs[0].buffer->data(), type, qkv_.data(), DType::f32, qkv_.size());
    const auto* mask = static_cast<const std::int32_t*>(inputs[1].buffer->data());
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const std::size_t pairs = size_of(batch_ * heads_);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, pairs), [&](const auto& range) {
      std::vector<float> scores(s);
      for (std::size_t bh = range.begin(); bh < range.end(); ++bh) {
        const std::size_t b = bh / size_of(heads_), head = bh % size_of(heads_);
        const float* base = qkv_.data() + b * s * 3 * h;
        for (std::size_t i = 0; i < s; ++i) {
          const float* q = base + i * 3 * h + head * d;
          float max_score = -INFINITY;
          for (std::size_t j = 0; j < s; ++j) {
            const bool far = window_ > 0 && (i > j ? i - j : j - i) > size_of(window_);
            if (far || !attention_allows(mask[b * s + i], mask[b * s + j])) {
              scores[j] = -INFINITY;
              continue;
            }
            const float* k = base + j * 3 * h + h + head * d;
            float dot = 0.0f;
            for (std::size_t c = 0; c < d; ++c) dot += q[c] * k[c];
            float score = dot * scale;
            if (buckets)
              score += bias_[size_of(buckets[(b * s + i) * s + j]) * size_of(heads_) + head];
            // Scores are an activation in the model's dtype, as in the framework.
            scores[j] = round_through(type, score);
            max_score = std::max(max_score, scores[j]);
          }
          float total = 0.0f;
          for (std::size_t j = 0; j < s; ++j) {
            scores[j] = scores[j] == -INFINITY ? 0.0f : std::exp(scores[j] - max_score);
            total += scores[j];
          }
          float* out = context_.data() + (b * s + i) * h + head * d;
          std::fill(out, out + d, 0.0f);
          for (std::size_t j = 0; j < s; ++j) {
            if (scores[j] == 0.0f) continue;
            const float p = round_through(type, scores[j] / total);
            const float* v = base + j * 3 * h + 2 * h + head * d;
            for (std::size_t c = 0; c < d; ++c) out[c] += p * v[c];
          }
        }
      }
    });
    convert(context_.data(), DType::f32, outputs[0].buffer->data(), outputs[0].dtype,
            context_.size());
  }

  std::string implementation() const override {
    return std::string(relative_ ? "reference relative attention " : "reference attention ") +
           std::string(dtype_name(desc_.dtype));
  }
  std::uint64_t workspace_bytes() const override {
    return static_cast<std::uint64_t>(batch_ * seq_ * hidden_ * 4) * sizeof(float);
  }
  double flops() const override {
    return 4.0 * static_cast<double>(batch_ * seq_ * seq_) * static_cast<double>(hidden_);
  }

 private:
  KernelDesc desc_;
  bool relative_;
  std::int64_t batch_ = 0, seq_ = 0, heads_ = 0, hidden_ = 0, window_ = 0;
  std::vector<float> qkv_, context_, bias_;
};

/// word[id] + position[s] + type[t], checking ids against the tables.
class ReferenceEmbedding final : public Kernel {
 public:
  explicit ReferenceEmbedding(const KernelDesc& desc) : desc_(desc) {
    require_shape(desc, 0, 1);
    tokens_ = desc.input_shapes[0][0];
    seq_ = desc.attrs_as<EmbeddingAttrs>().seq;
  }

  void set_constants(std::span<const Tensor> constants) override {
    // Given positions (packed rows) are checked per token instead.
    hidden_ = check_embedding_tables(constants, desc_.input_shapes.size() > 2 ? 0 : seq_);
    tables_.assign(constants.begin(), constants.end());
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    const auto* ids = static_cast<const std::int32_t*>(inputs[0].buffer->data());
    const auto* types = static_cast<const std::int32_t*>(inputs[1].buffer->data());
    const std::size_t h = size_of(hidden_);
    check_embedding_ids(ids, types, tokens_, tables_);
    // Packed rows give each token's position; else position = index % seq.
    const auto* positions =
        inputs.size() > 2 ? static_cast<const std::int32_t*>(inputs[2].buffer->data()) : nullptr;
    if (positions) check_position_ids(positions, tokens_, tables_[1].shape[0]);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, size_of(tokens_)), [&](const auto& range) {
      std::vector<float> sum(h), part(h);
      for (std::size_t t = range.begin(); t < range.end(); ++t) {
        const std::size_t rows[3] = {size_of(ids[t]),
                                     positions ? size_of(positions[t]) : t % size_of(seq_),
                                     size_of(types[t])};
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int table = 0; table < 3; ++table) {
          const Tensor& tt = tables_[size_of(table)];
          convert(
              static_cast<const char*>(tt.buffer->data()) + rows[table] * h * dtype_size(tt.dtype),
              tt.dtype, part.data(), DType::f32, h);
          for (std::size_t c = 0; c < h; ++c) sum[c] += part[c];
        }
        convert(
            sum.data(), DType::f32,
            static_cast<char*>(outputs[0].buffer->data()) + t * h * dtype_size(outputs[0].dtype),
            outputs[0].dtype, h);
      }
    });
  }

  std::string implementation() const override {
    return "reference embedding " + std::string(dtype_name(desc_.dtype));
  }

 private:
  KernelDesc desc_;
  std::int64_t tokens_ = 0, seq_ = 0, hidden_ = 0;
  std::vector<Tensor> tables_;
};

class ReferenceTakeRows final : public Kernel {
 public:
  explicit ReferenceTakeRows(const KernelDesc& desc)
      : stride_(desc.attrs_as<RowStrideAttrs>().stride) {
    require_shape(desc, 0, 2);
  }
  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    const std::size_t row_bytes = size_of(inputs[0].shape[1]) * dtype_size(inputs[0].dtype);
    for (std::int64_t r = 0; r < outputs[0].shape[0]; ++r) {
      std::memcpy(
          static_cast<char*>(outputs[0].buffer->data()) + size_of(r) * row_bytes,
          static_cast<const char*>(inputs[0].buffer->data()) + size_of(r * stride_) * row_bytes,
          row_bytes);
    }
  }
  std::string implementation() const override { return "reference take_rows"; }

 private:
  std::int64_t stride_;
};

}  // namespace

std::int64_t check_embedding_tables(std::span<const Tensor> tables, std::int64_t seq) {
  if (tables.size() != 3)
    throw RuntimeFailure("embedding: constants are word, position and type tables");
  if (tables[1].shape.at(0) < seq) {
    throw RuntimeFailure(fmt::format("sequence length {} exceeds the {} position embeddings", seq,
                                     tables[1].shape.at(0)));
  }
  return tables[0].shape.at(1);
}

void check_embedding_ids(const std::int32_t* ids, const std::int32_t* types, std::int64_t tokens,
                         std::span<const Tensor> tables) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= tables[0].shape[0]) {
      throw RuntimeFailure(fmt::format("input_ids[{}] = {} is outside the vocabulary of {}", t,
                                       ids[t], tables[0].shape[0]));
    }
    if (types[t] < 0 || types[t] >= tables[2].shape[0]) {
      throw RuntimeFailure(fmt::format("token_type_ids[{}] = {} is outside the {} token types", t,
                                       types[t], tables[2].shape[0]));
    }
  }
}

void check_position_ids(const std::int32_t* positions, std::int64_t tokens, std::int64_t rows) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (positions[t] < 0 || positions[t] >= rows) {
      throw RuntimeFailure(fmt::format(
          "position_ids[{}] = {} is outside the {} position embeddings", t, positions[t], rows));
    }
  }
}

void register_reference_kernels(KernelRegistry& registry, const std::vector<DType>& dtypes,
                                MatMulNumerics numerics, ParallelFor parallel) {
  if (std::find(dtypes.begin(), dtypes.end(), DType::f32) != dtypes.end()) {
    register_reference_train_kernels(registry, std::move(parallel), numerics);
  }
  for (DType type : dtypes) {
    const MatMulNumerics for_type{type == DType::f16 ? numerics.accumulate : DType::f32,
                                  numerics.stochastic_rounding, numerics.seed};
    registry.add(OpKind::matmul, type, [for_type](const KernelDesc& d, Device&) {
      return make_reference_matmul(d, for_type);
    });
    registry.add(OpKind::linear, type, [for_type](const KernelDesc& d, Device&) {
      return std::make_unique<ReferenceLinear>(d, for_type);
    });
    registry.add(OpKind::layernorm, type, [](const KernelDesc& d, Device&) {
      return std::make_unique<ReferenceLayerNorm>(d);
    });
    for (const OpKind op : {OpKind::attention, OpKind::relative_attention})
      registry.add(op, type, [](const KernelDesc& d, Device&) {
        return std::make_unique<ReferenceAttention>(d);
      });
    registry.add(OpKind::embedding, type, [](const KernelDesc& d, Device&) {
      return std::make_unique<ReferenceEmbedding>(d);
    });
    registry.add(OpKind::take_rows, type, [](const KernelDesc& d, Device&) {
      return std::make_unique<ReferenceTakeRows>(d);
    });
  }
}

}  // namespace polyhal
