#include "model/bert_program.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "model/families/model_family.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"

namespace polyhal {
namespace {

bool decays(const std::string& name) {
  return !name.ends_with(".bias") && !is_norm_parameter(name);
}

/// Lowers BERT's layers to ops. Forward ops go to Phase::forward as they are
/// declared; in training each also records how to emit its backward, and
/// finish() emits those in reverse. A tensor read by several ops gets the
/// sum of their gradients (contribute()).
class Builder final : public families::EncoderOps {
 public:
  Builder(BertProgram& out, const BertProgramOptions& options)
      : out_(out),
        p_(out.program),
        o_(options),
        family_(families::model_family(options.config.model_type)),
        training_(options.training) {}

  const BertConfig& config() const override { return o_.config; }
  const families::ModelFamily& family() const { return family_; }

  // ---- tensors ------------------------------------------------------------

  /// An activation: in training one per declaration (backward reads it), in
  /// inference one per role, reused by every layer (layer l's "qkv" is layer
  /// l-1's buffer), which is all a forward pass needs.
  int act(const std::string& role, Shape shape) {
    if (training_) {
      const int t = p_.activation(prefix_ + role, std::move(shape));
      if (recording_) recorded_.push_back(t);
      return t;
    }
    if (auto it = shared_.find(role); it != shared_.end()) {
      if (p_.shape(it->second) != shape)
        throw std::logic_error(fmt::format("bert program: role '{}' with two shapes", role));
      return it->second;
    }
    const int t = p_.activation(role, std::move(shape));
    shared_[role] = t;
    return t;
  }

  /// A parameter: in training an f32 master and its f32 gradient; in
  /// inference matrices at the compute precision, vectors in f32.
  int param(const std::string& name, Shape shape) override {
    const DType type = training_ || shape.size() < 2 ? DType::f32 : p_.precision();
    const int w = p_.tensor(name, "weights", shape, type);
    int g = -1;
    if (training_) g = p_.tensor("grad." + name, "gradients", std::move(shape), DType::f32);
    out_.parameters.push_back({name, w, g, decays(name), family_.zero_tensor(o_.config, name)});
    grads_[w] = g;
    return w;
  }
  std::pair<int, int> dense_params(const std::string& prefix, std::int64_t out,
                                   std::int64_t in) override {
    const int w = param(prefix + ".weight", {out, in});
    return {w, param(prefix + ".bias", {out})};
  }
  std::pair<int, int> norm_params(const std::string& prefix) override {
    const std::int64_t h = o_.config.hidden_size;
    const int gamma = param(prefix + ".weight", {h});
    return {gamma, param(prefix + ".bias", {h})};
  }
  /// Q, K and V as row views of one [3H, H] weight and [3H] bias: one GEMM.
  /// Each view is a parameter of its own (LAMB's trust ratio per tensor,
  /// Hugging Face names in checkpoints).
  std::pair<int, int> fused_qkv(const std::string& prefix) override {
    return fused_dense(prefix + "qkv",
                       {prefix + "attention.self.query", prefix + "attention.self.key",
                        prefix + "attention.self.value"});
  }
  /// Dense layers of the same input as row views of one [parts x H, H]
  /// weight and bias (named `fused`), each part a parameter named as listed.
  std::pair<int, int> fused_dense(const std::string& fused,
                                  const std::vector<std::string>& parts) override {
    const std::int64_t h = o_.config.hidden_size, rows = h * std::ssize(parts);
    const DType wtype = training_ ? DType::f32 : p_.precision();
    const int w = p_.tensor(fused + ".weight", "weights", {rows, h}, wtype);
    const int b = p_.tensor(fused + ".bias", "weights", {rows}, DType::f32);
    int gw = -1, gb = -1;
    if (training_) {
      gw = p_.tensor("grad." + fused + ".weight", "gradients", {rows, h}, DType::f32);
      gb = p_.tensor("grad." + fused + ".bias", "gradients", {rows}, DType::f32);
    }
    for (std::int64_t q = 0; q < std::ssize(parts); ++q) {
      const std::string& name = parts[static_cast<std::size_t>(q)];
      for (const auto& [tensor, grad, suffix] :
           {std::tuple{w, gw, ".weight"}, std::tuple{b, gb, ".bias"}}) {
        out_.parameters.push_back(
            {name + suffix, p_.view(tensor, q * h, h, name + suffix),
             training_ ? p_.view(grad, q * h, h, "grad." + name + suffix) : -1,
             std::string(suffix) == ".weight", family_.zero_tensor(o_.config, name + suffix)});
      }
    }
    grads_[w] = gw;
    grads_[b] = gb;
    return {w, b};
  }

  // ---- pipeline stage boundaries ------------------------------------------

  /// A stage's input: the previous stage's output, uploaded before forward.
  /// Its gradient, summed over every reader, is kept for download.
  int stage_input() {
    const int x = p_.activation("stage input", {tokens(), o_.config.hidden_size});
    out_.stage_input = x;
    // Registered first, so emitted after every contribution to grad(x).
    backward([=, this] {
      out_.stage_input_grad = grad(x);
      p_.set_kept(out_.stage_input_grad);
    });
    return x;
  }

  /// A stage's output, and its gradient uploaded from the next stage.
  void stage_output(int x) {
    out_.stage_output = x;
    out_.stage_output_grad = p_.activation("stage output grad", p_.shape(x));
    // Registered last, so emitted first: the gradient backward starts from.
    backward([=, this] { contribute(x, out_.stage_output_grad); });
  }

  /// The MLM decoder of a last stage without the embeddings: its own copy of
  /// the tied word embeddings (the pipeline sums the two copies' gradients,
  /// so both take the same update).
  void tied_word_embeddings() {
    word_ = param("bert.embeddings.word_embeddings.weight",
                  {o_.config.vocab_size, o_.config.hidden_size});
  }

  /// Dropout streams are numbered in declaration order over the whole
  /// model: a stage starting at `layer` skips those of the embeddings and
  /// the layers before it, so its masks are the unpipelined program's.
  void skip_streams_before(std::int64_t layer) {
    const std::uint64_t hidden = family_.hidden_dropouts_per_layer();
    const std::uint64_t per_layer =
        (o_.dropout > 0.0 ? hidden : 0u) + (o_.attention_dropout > 0.0 ? 1u : 0u);
    streams_ = (o_.dropout > 0.0 ? 1u : 0u) + static_cast<std::uint64_t>(layer) * per_layer;
  }

  // ---- layers: each lowers to inference or training ops -------------------

  int embeddings() {
    const std::int64_t h = o_.config.hidden_size, t = tokens(), s = o_.shape.seq;
    const std::int64_t e = o_.config.embedding_width();
    word_ = param("bert.embeddings.word_embeddings.weight", {o_.config.vocab_size, e});
    const int position =
        param("bert.embeddings.position_embeddings.weight", {o_.config.max_position_embeddings, e});
    const int type =
        param("bert.embeddings.token_type_embeddings.weight", {o_.config.type_vocab_size, e});
    const int gamma = param("bert.embeddings.LayerNorm.weight", {e});
    const int beta = param("bert.embeddings.LayerNorm.bias", {e});
    // ELECTRA-small: embeddings of their own width, then embeddings_project.
    const auto projected = [&, e, h](int x) {
      if (e == h) return x;
      const auto [w, bias] = dense_params("bert.embeddings_project", h, e);
      return linear(x, w, bias, h, Activation::none, std::nullopt, "projected");
    };
    // A role's activations share one shape: narrower embeddings have their own.
    const int summed = act(e == h ? "block" : "embedding sum", {t, e});
    if (!training_) {
      std::vector<int> in{out_.ids, out_.types};
      if (out_.positions >= 0) in.push_back(out_.positions);  // packed: restarting per sequence
      p_.op(Phase::forward, OpKind::embedding, std::move(in), {summed}, EmbeddingAttrs{s},
            {word_, position, type});
      return projected(layernorm(summed, gamma, beta, e == h ? "hidden" : "embedded"));
    }
    std::vector<int> in{out_.ids, out_.types, word_, position, type};
    if (out_.positions >= 0) in.push_back(out_.positions);  // packed: restarting per sequence
    p_.op(Phase::forward, OpKind::embedding_train, std::move(in), {summed}, EmbeddingAttrs{s});
    backward([=, this] {
      std::vector<int> back_in{grad(summed), out_.ids, out_.types};
      if (out_.positions >= 0) back_in.push_back(out_.positions);
      p_.op(Phase::backward, OpKind::embedding_backward, std::move(back_in),
            {grads_.at(word_), grads_.at(position), grads_.at(type)}, EmbeddingAttrs{s});
    });
    return projected(dropout(layernorm(summed, gamma, beta, "hidden"), "hidden dropped"));
  }

  /// Declares a layer's forward ops with `body`, which returns the layer's
  /// output. With `layer` recomputed only that output is kept (the next
  /// layer's input); backward runs the layer's forward ops again, just before
  /// the layer's own backward ops (closures run last-registered first), and
  /// then reads the intermediates as if they had been kept.
  int layer(std::int64_t layer, const std::string& prefix,
            const std::function<int()>& body) override {
    prefix_ = prefix;
    const bool recompute = training_ && o_.recompute.contains(layer);
    const std::size_t first = p_.op_count(Phase::forward);
    recording_ = recompute;
    recorded_.clear();
    const int next = body();
    recording_ = false;
    if (recompute) {
      for (const int t : recorded_)
        if (t != next) p_.set_recomputed(t);
      const std::size_t last = p_.op_count(Phase::forward);
      backward([=, this] { p_.repeat_in_backward(first, last); });
    }
    prefix_.clear();
    return next;
  }

  /// Pooler, NSP and MLM heads; in training also the loss, whose logit
  /// gradients start backward.
  void heads(int x) {
    out_.hidden = x;
    if (o_.head.kind == TaskHead::Kind::question_answering) return question_answering(x);
    if (o_.head.kind == TaskHead::Kind::classification) return classification(x);
    pretraining_heads(x);
  }

  /// qa_outputs over every token: start and end logits; span loss in
  /// training. ModernBERT's: its prediction head on every token, then
  /// `classifier`.
  void question_answering(int x) {
    const std::int64_t h = o_.config.hidden_size, b = o_.shape.batch;
    const bool prediction_head = family_.qa_prediction_head();
    if (prediction_head) {
      const auto [head_w, head_b] = dense_params("bert.pooler.dense", h, h);
      const auto [gamma, beta] = norm_params("bert.pooler.norm");
      const int dense =
          linear(x, head_w, head_b, h, family_.pooler_activation(), std::nullopt, "qa head");
      x = dropout(layernorm(dense, gamma, beta, "qa head normed"), "qa head dropped");
    }
    const auto [w, bias] = dense_params(prediction_head ? "classifier" : "qa_outputs", 2, h);
    out_.head_logits = linear(x, w, bias, 2, Activation::none, std::nullopt, "qa logits");
    if (!training_) return;
    // Packed rows: a (start, end) per sequence slot, each softmax within its
    // sequence (the attention mask says which tokens are whose).
    const std::int64_t k = o_.packed_sequences;
    out_.span_positions = p_.tensor("span positions", "inputs", {k > 0 ? b * k : b, 2}, DType::i32);
    head_loss(OpKind::span_loss, out_.span_positions, k > 0 ? out_.mask : -1);
  }

  /// The pooled [CLS] output, hidden dropout, then `classifier`.
  void classification(int x) {
    const std::int64_t h = o_.config.hidden_size, b = o_.shape.batch;
    const auto [pool_w, pool_b] = dense_params("bert.pooler.dense", h, h);
    const auto [w, bias] = dense_params("classifier", o_.head.num_labels, h);
    int cls = -1;
    if (family_.mean_pooled_classifier(o_.config)) {  // the mean of each row's tokens
      cls = act("cls", {b, h});
      p_.op(Phase::forward, OpKind::mean_pool, {x, out_.mask}, {cls});
      if (training_)
        backward([=, this] {
          const int dx = fresh_gradient(x);
          p_.op(Phase::backward, OpKind::mean_pool_backward, {grad(cls), out_.mask}, {dx});
          contribute(x, dx);
        });
    } else if (training_) {  // gathered, so backward writes the whole gradient of x
      out_.cls_positions = p_.tensor("cls positions", "inputs", {b}, DType::i32);
      cls = act("cls", {b, h});
      p_.op(Phase::forward, OpKind::gather_rows, {x, out_.cls_positions}, {cls});
      backward([=, this] {
        const int dx = fresh_gradient(x);
        p_.op(Phase::backward, OpKind::gather_rows_backward, {grad(cls), out_.cls_positions}, {dx});
        contribute(x, dx);
      });
    } else {
      cls = act("cls", {b, h});
      p_.op(Phase::forward, OpKind::take_rows, {x}, {cls}, RowStrideAttrs{o_.shape.seq});
    }
    out_.pooled =
        linear(cls, pool_w, pool_b, h, family_.pooler_activation(), std::nullopt, "pooled");
    if (family_.pooler_norm()) {  // ModernBertPredictionHead: dense, activation, LayerNorm
      const auto [gamma, beta] = norm_params("bert.pooler.norm");
      out_.pooled = layernorm(out_.pooled, gamma, beta, "pooled normed");
    }
    const int dropped = dropout(out_.pooled, "pooled dropped");
    out_.head_logits =
        linear(dropped, w, bias, o_.head.num_labels, Activation::none, std::nullopt, "logits");
    if (!training_) return;
    if (o_.head.num_labels == 1) {
      out_.targets = p_.tensor("regression targets", "inputs", {b}, DType::f32);
      head_loss(OpKind::regression_loss, out_.targets);
    } else {
      out_.labels = p_.tensor("labels", "inputs", {b}, DType::i32);
      head_loss(OpKind::classification_loss, out_.labels);
    }
  }

  /// A fine-tuning loss on the head's logits; its output is their gradient.
  void head_loss(OpKind op, int labels, int mask = -1) {
    out_.loss_scale = p_.tensor("loss scale", "inputs", {1}, DType::f32);
    out_.head_loss = p_.activation("loss", {1});
    const int dlogits = fresh_gradient(out_.head_logits);
    std::vector<int> in{out_.head_logits, labels, out_.loss_scale};
    if (mask >= 0) in.push_back(mask);
    p_.op(Phase::forward, op, std::move(in), {out_.head_loss, dlogits});
    contribute(out_.head_logits, dlogits);
  }

  void pretraining_heads(int x) {
    const std::int64_t h = o_.config.hidden_size, v = o_.config.vocab_size, b = o_.shape.batch;
    const bool heads = training_ || o_.heads;
    const auto [pool_w, pool_b] = dense_params("bert.pooler.dense", h, h);
    int transform_w = -1, transform_b = -1, gamma = -1, beta = -1, vocab_bias = -1, nsp_w = -1,
        nsp_b = -1;
    if (heads) {
      std::tie(transform_w, transform_b) = dense_params("cls.predictions.transform.dense", h, h);
      std::tie(gamma, beta) = norm_params("cls.predictions.transform.LayerNorm");
      vocab_bias = param("cls.predictions.bias", {v});
      std::tie(nsp_w, nsp_b) = dense_params("cls.seq_relationship", 2, h);
    }
    // Packed rows: every sequence's own [CLS], gathered (a gradient of its own).
    // Without the heads (embeddings of packed text) each row's first token is
    // pooled, as unpacked; the caller pools each sequence itself.
    const std::int64_t k = heads ? o_.packed_sequences : 0;
    if (k > 0) {
      out_.nsp_positions = p_.tensor("nsp positions", "inputs", {b * k}, DType::i32);
      const int cls = act("cls", {b * k, h});
      p_.op(Phase::forward, OpKind::gather_rows, {x, out_.nsp_positions}, {cls});
      backward([=, this] {
        const int dx = fresh_gradient(x);
        p_.op(Phase::backward, OpKind::gather_rows_backward, {grad(cls), out_.nsp_positions}, {dx});
        contribute(x, dx);
      });
      out_.pooled = linear(cls, pool_w, pool_b, h, Activation::tanh, std::nullopt, "pooled");
    }
    // [CLS] rows first: in training their gradient is added (take_rows_backward
    // "+=") into the one the MLM head's backward writes before it.
    const int cls = k > 0 ? -1 : act("cls", {b, h});
    if (k == 0) p_.op(Phase::forward, OpKind::take_rows, {x}, {cls}, RowStrideAttrs{o_.shape.seq});
    if (training_ && k == 0) {
      backward([=, this] {
        p_.op(Phase::backward, OpKind::take_rows_backward, {grad(cls)}, {accumulator(x)},
              RowStrideAttrs{o_.shape.seq});
      });
    }
    if (k == 0)
      out_.pooled = linear(cls, pool_w, pool_b, h, Activation::tanh, std::nullopt, "pooled");
    if (!heads) return;
    out_.nsp_logits =
        linear(out_.pooled, nsp_w, nsp_b, 2, Activation::none, std::nullopt, "nsp logits");
    int rows = x;
    if (o_.max_predictions > 0) {  // the labelled positions only
      const std::int64_t predicted = b * o_.max_predictions;
      out_.mlm_positions = p_.tensor("mlm positions", "inputs", {predicted}, DType::i32);
      rows = act("masked rows", {predicted, h});
      p_.op(Phase::forward, OpKind::gather_rows, {x, out_.mlm_positions}, {rows});
      if (training_)
        backward([=, this] {
          const int dx = fresh_gradient(x);
          p_.op(Phase::backward, OpKind::gather_rows_backward, {grad(rows), out_.mlm_positions},
                {dx});
          contribute(x, dx);
        });
    }
    const int transformed =
        linear(rows, transform_w, transform_b, h, Activation::gelu, std::nullopt, "mlm transform");
    const int normed = layernorm(transformed, gamma, beta, "mlm normed");
    // The decoder is tied to the word embeddings.
    out_.mlm_logits =
        linear(normed, word_, vocab_bias, v, Activation::none, std::nullopt, "mlm logits");
    if (training_) loss();
  }

  /// Emits the recorded backward ops, last forward op first, and types the
  /// program's tensors.
  void finish() {
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) (*it)();
    p_.finish();
  }

 private:
  std::int64_t tokens() const override { return o_.shape.batch * o_.shape.seq; }

  /// y = act(x W^T + b) [+ residual]. Inference: one linear op with the
  /// activation and residual in its epilogue, W and b its constants.
  /// Training: dense on the weights' compute copy, then the activation, then
  /// (before a residual) hidden dropout and the add, each with its backward.
  /// `encoder_linear`: the module name of an encoder linear (int8_scales.hpp),
  /// which inference multiplies with options.encoder_math.
  int linear(int x, int w, int bias, std::int64_t out, Activation activation,
             std::optional<int> residual, const std::string& role,
             const std::string& encoder_linear = {}) override {
    const std::int64_t rows = p_.shape(x)[0];
    if (!training_) {
      const int y = act(role, {rows, out});
      std::vector<int> inputs{x};
      if (residual) inputs.push_back(*residual);
      LinearAttrs attrs{out, activation, residual.has_value()};
      if (!encoder_linear.empty()) {
        out_.calibration_points.push_back({p_.op_count(Phase::forward), encoder_linear, x});
        attrs.math = o_.encoder_math;
        if (role == "ffn out") attrs.input_activation = Activation::gelu;
        if (attrs.math == LinearMath::int8 && !o_.int8_max_abs.empty()) {
          const auto it = o_.int8_max_abs.find(encoder_linear);
          if (it == o_.int8_max_abs.end())
            throw ConfigError(
                fmt::format("int8: no calibrated scale for linear \"{}\"", encoder_linear));
          attrs.input_scale = int8_scale(it->second);
        }
        if (attrs.math == LinearMath::int8 && attrs.input_scale == 0.0f &&
            o_.int8_channel_max_abs.count(encoder_linear) != 0) {
          const int smoothing = p_.tensor(encoder_linear + ".int8_smoothing", "weights",
                                          {p_.shape(x)[1]}, DType::f32);
          out_.smoothing_points.push_back({smoothing, w, encoder_linear});
          p_.op(Phase::forward, OpKind::linear, std::move(inputs), {y}, attrs,
                {w, bias, smoothing});
          return y;
        }
      }
      p_.op(Phase::forward, OpKind::linear, std::move(inputs), {y}, attrs, {w, bias});
      return y;
    }
    const int weight = p_.compute_copy(w);
    const bool more = activation != Activation::none || residual.has_value();
    int y = act(more ? role + " pre" : role, {rows, out});
    p_.op(Phase::forward, OpKind::dense, {x, weight, bias}, {y});
    backward([=, this] {
      const int dx = fresh_gradient(x);
      p_.op(Phase::backward, OpKind::dense_backward, {grad(y), x, weight},
            {dx, grads_.at(w), grads_.at(bias)});
      contribute(x, dx);
    });
    if (activation == Activation::gelu) y = unary(OpKind::gelu, y, role);
    if (activation == Activation::tanh) y = unary(OpKind::tanh, y, role);
    if (activation == Activation::relu) y = unary(OpKind::relu, y, role);
    if (residual) y = add(dropout(y, role + " dropped"), *residual, role);
    return y;
  }

  /// gelu, tanh or relu, with its backward (gelu's reads the input, tanh's
  /// and relu's the output).
  int unary(OpKind op, int x, const std::string& role) {
    const int y = act(role, p_.shape(x));
    p_.op(Phase::forward, op, {x}, {y});
    backward([=, this] {
      const int dx = fresh_gradient(x);
      const bool gelu = op == OpKind::gelu;
      const OpKind backward_op = gelu                 ? OpKind::gelu_backward
                                 : op == OpKind::relu ? OpKind::relu_backward
                                                      : OpKind::tanh_backward;
      p_.op(Phase::backward, backward_op, {grad(y), gelu ? x : y}, {dx});
      contribute(x, dx);
    });
    return y;
  }

  int add(int a, int b, const std::string& role) {
    const int y = act(role, p_.shape(a));
    p_.op(Phase::forward, OpKind::add, {a, b}, {y});
    backward([=, this] {
      contribute(a, grad(y));
      contribute(b, grad(y));
    });
    return y;
  }

  /// Hidden dropout (training, p > 0): the mask is keyed by (rng, stream),
  /// numbered in declaration order, and regenerated in backward.
  int dropout(int x, const std::string& role) {
    if (!training_ || o_.dropout <= 0.0) return x;
    const int y = act(role, p_.shape(x));
    const DropoutAttrs attrs{o_.dropout, streams_++};
    p_.op(Phase::forward, OpKind::dropout, {x, out_.rng}, {y}, attrs);
    backward([=, this] {
      const int dx = fresh_gradient(x);
      p_.op(Phase::backward, OpKind::dropout_backward, {grad(y), out_.rng}, {dx}, attrs);
      contribute(x, dx);
    });
    return y;
  }

  int layernorm(int x, int gamma, int beta, const std::string& role) override {
    const LayerNormAttrs attrs{o_.config.layer_norm_eps, false};
    const int y = act(role, p_.shape(x));
    if (!training_) {
      p_.op(Phase::forward, OpKind::layernorm, {x}, {y}, attrs, {gamma, beta});
      return y;
    }
    const std::int64_t rows = p_.shape(x)[0];
    const int mean = act(role + " mean", {rows}), rstd = act(role + " rstd", {rows});
    p_.op(Phase::forward, OpKind::layernorm_train, {x, gamma, beta}, {y, mean, rstd}, attrs);
    backward([=, this] {
      const int dx = fresh_gradient(x);
      p_.op(Phase::backward, OpKind::layernorm_backward, {grad(y), x, gamma, mean, rstd},
            {dx, grads_.at(gamma), grads_.at(beta)});
      contribute(x, dx);
    });
    return y;
  }

  int grouped_dense(int x, int w, int bias, std::int64_t groups, const std::string& role) override {
    const int weight = training_ ? p_.compute_copy(w) : w;
    const int y = act(role, {tokens(), o_.config.hidden_size});
    const GroupedDenseAttrs attrs{groups};
    p_.op(Phase::forward, OpKind::grouped_dense, {x, weight, bias}, {y}, attrs);
    if (training_)
      backward([=, this] {
        const int dx = fresh_gradient(x);
        p_.op(Phase::backward, OpKind::grouped_dense_backward, {grad(y), x, weight},
              {dx, grads_.at(w), grads_.at(bias)}, attrs);
        contribute(x, dx);
      });
    return y;
  }

  /// An element-wise op (glu, swish) with its backward, which reads the input.
  int elementwise(OpKind op, OpKind backward_op, int x, Shape shape,
                  const std::string& role) override {
    const int y = act(role, std::move(shape));
    p_.op(Phase::forward, op, {x}, {y});
    if (training_)
      backward([=, this] {
        const int dx = fresh_gradient(x);
        p_.op(Phase::backward, backward_op, {grad(y), x}, {dx});
        contribute(x, dx);
      });
    return y;
  }

  /// GroupBERT's grouped convolution along each sequence (the attention
  /// mask keeps it inside a sequence of a packed row).
  int sequence_conv(int x, int w) override {
    const SequenceConvAttrs attrs{o_.shape.batch, o_.shape.seq, o_.config.conv_group_size,
                                  o_.config.conv_kernel_size};
    const int weight = training_ ? p_.compute_copy(w) : w;
    const int y = act("conv", p_.shape(x));
    p_.op(Phase::forward, OpKind::sequence_conv, {x, weight, out_.mask}, {y}, attrs);
    if (training_)
      backward([=, this] {
        const int dx = fresh_gradient(x);
        p_.op(Phase::backward, OpKind::sequence_conv_backward, {grad(y), x, weight, out_.mask},
              {dx, grads_.at(w)}, attrs);
        contribute(x, dx);
      });
    return y;
  }

  int attention(int qkv, std::int64_t window) override {
    const std::int64_t b = o_.shape.batch, s = o_.shape.seq, h = o_.config.hidden_size;
    const std::int64_t heads = o_.config.num_attention_heads;
    const int context = act("context", {b * s, h});
    const bool relative = out_.relative_buckets >= 0;  // MPNet: one bias table for every layer
    if (relative && relative_bias_ < 0)
      relative_bias_ =
          param("bert.encoder.relative_attention_bias.weight", {family_.relative_buckets(), heads});
    AttentionAttrs attrs{b, s, heads, 0.0, 0, window};
    if (!training_) {
      if (relative)
        p_.op(Phase::forward, OpKind::relative_attention, {qkv, out_.mask, out_.relative_buckets},
              {context}, attrs, {relative_bias_});
      else
        p_.op(Phase::forward, OpKind::attention, {qkv, out_.mask}, {context}, attrs);
      return context;
    }
    std::vector<int> inputs{qkv, out_.mask};
    if (relative) inputs.insert(inputs.end(), {out_.relative_buckets, relative_bias_});
    if (o_.attention_dropout > 0.0) {
      attrs.dropout = o_.attention_dropout;
      attrs.stream = streams_++;
      inputs.push_back(out_.rng);
    }
    const int probs = act("probs", {b, heads, s, s});
    p_.op(Phase::forward, relative ? OpKind::relative_attention_train : OpKind::attention_train,
          inputs, {context, probs}, attrs);
    backward([=, this] {
      const int dqkv = fresh_gradient(qkv);
      std::vector<int> in{grad(context), qkv, probs};
      if (relative) in.push_back(out_.relative_buckets);
      if (attrs.dropout > 0.0) in.push_back(out_.rng);
      in.push_back(out_.mask);  // lets a kernel skip the pairs packed rows never attend
      std::vector<int> outs{dqkv};
      if (relative) outs.push_back(grads_.at(relative_bias_));
      p_.op(Phase::backward,
            relative ? OpKind::relative_attention_backward : OpKind::attention_backward,
            std::move(in), std::move(outs), attrs);
      contribute(qkv, dqkv);
    });
    return context;
  }

  /// Rotary positions on the queries and keys of a fused QKV: each token's
  /// position in its sequence (the row index, or a packed row's position ids).
  int rotary(int qkv, double theta) override {
    const RotaryAttrs attrs{o_.shape.seq, o_.config.num_attention_heads, theta};
    const int y = act("rotated", p_.shape(qkv));
    std::vector<int> in{qkv};
    if (out_.positions >= 0) in.push_back(out_.positions);
    p_.op(Phase::forward, OpKind::rotary, in, {y}, attrs);
    if (training_)
      backward([=, this] {
        const int dqkv = fresh_gradient(qkv);
        std::vector<int> back_in{grad(y)};
        if (out_.positions >= 0) back_in.push_back(out_.positions);
        p_.op(Phase::backward, OpKind::rotary_backward, std::move(back_in), {dqkv}, attrs);
        contribute(qkv, dqkv);
      });
    return y;
  }

  /// MLM + NSP loss; its outputs are the gradients of the logits.
  void loss() {
    const std::int64_t b = o_.shape.batch;
    const std::int64_t labels = o_.max_predictions > 0 ? b * o_.max_predictions : tokens();
    out_.mlm_labels = p_.tensor("mlm labels", "inputs", {labels}, DType::i32);
    // Packed rows: one label per sequence slot, -100 where a row has fewer.
    const std::int64_t sequences = o_.packed_sequences > 0 ? b * o_.packed_sequences : b;
    out_.nsp_labels = p_.tensor("nsp labels", "inputs", {sequences}, DType::i32);
    out_.loss_scale = p_.tensor("loss scale", "inputs", {1}, DType::f32);
    out_.losses = p_.activation("losses", {2});
    const int dmlm = fresh_gradient(out_.mlm_logits), dnsp = fresh_gradient(out_.nsp_logits);
    p_.op(Phase::forward, OpKind::pretraining_loss,
          {out_.mlm_logits, out_.mlm_labels, out_.nsp_logits, out_.nsp_labels, out_.loss_scale},
          {out_.losses, dmlm, dnsp});
    contribute(out_.mlm_logits, dmlm);
    contribute(out_.nsp_logits, dnsp);
  }

  void backward(std::function<void()> emit) { backward_.push_back(std::move(emit)); }

  /// A new tensor for a gradient of `of`, written by one backward op.
  int fresh_gradient(int of) {
    const int g = p_.activation("d " + p_.name(of), p_.shape(of), /*transient=*/true);
    fresh_.insert(g);
    return g;
  }
  /// The gradient of `t` so far (every op reading `t` has contributed: they
  /// come later in forward order, so earlier in backward).
  int grad(int t) const {
    const auto it = gradient_.find(t);
    if (it == gradient_.end())
      throw std::logic_error(fmt::format("bert program: no gradient reaches '{}'", p_.name(t)));
    return it->second;
  }
  /// Adds `g` to the gradient of `t`: the first contribution is used as it
  /// is (no copy), a later one is summed into a new tensor.
  void contribute(int t, int g) {
    const auto it = gradient_.find(t);
    if (it == gradient_.end()) {
      gradient_[t] = g;
      if (!used_.insert(g).second) fresh_.erase(g);  // now shared by two tensors
      return;
    }
    const int sum = fresh_gradient(t);
    p_.op(Phase::backward, OpKind::add, {it->second, g}, {sum});
    it->second = sum;
    used_.insert(sum);
  }
  /// The gradient of `t` for an op that adds into it in place: it must
  /// exist and belong to `t` alone.
  int accumulator(int t) const {
    const int g = grad(t);
    if (!fresh_.contains(g))
      throw std::logic_error(
          fmt::format("bert program: '{}' has no own gradient to add into", p_.name(t)));
    return g;
  }

  BertProgram& out_;
  Program& p_;
  const BertProgramOptions& o_;
  const families::ModelFamily& family_;
  bool training_;
  std::string prefix_;
  std::map<std::string, int> shared_;  // inference: role -> its tensor
  std::map<int, int> grads_;           // parameter -> its gradient
  std::map<int, int> gradient_;        // activation -> its gradient so far
  std::set<int> fresh_, used_;         // gradients written by one op / assigned to a tensor
  std::vector<std::function<void()>> backward_;
  std::uint64_t streams_ = 0;
  int word_ = -1;
  int relative_bias_ = -1;  ///< MPNet: the relative-position bias table, declared once
  bool recording_ = false;  // act() lists the tensors it makes (a recomputed layer)
  std::vector<int> recorded_;
};

}  // namespace

std::vector<std::int32_t> relative_bucket_input(const BertConfig& config, BertShape shape,
                                                const std::vector<std::int32_t>& positions) {
  const auto& family = families::model_family(config.model_type);
  const auto s = static_cast<std::size_t>(shape.seq);
  const auto at = [&](std::size_t b, std::size_t t) -> std::int64_t {
    return positions.empty() ? static_cast<std::int64_t>(t) : positions[b * s + t];
  };
  // Every relative position the rows hold, bucketed once (the span covers
  // any given positions, so no lookup leaves the table).
  std::int64_t low = 0, high = 0;
  for (std::size_t n = 0; n < positions.size(); ++n) {
    low = std::min<std::int64_t>(low, positions[n]);
    high = std::max<std::int64_t>(high, positions[n]);
  }
  const std::int64_t span = std::max<std::int64_t>(high - low, shape.seq - 1);
  std::vector<std::int32_t> by_relative(static_cast<std::size_t>(2 * span + 1));
  for (std::int64_t r = -span; r <= span; ++r)
    by_relative[static_cast<std::size_t>(r + span)] = family.relative_bucket(r);
  std::vector<std::int32_t> out(static_cast<std::size_t>(shape.batch) * s * s);
  for (std::size_t b = 0; b < static_cast<std::size_t>(shape.batch); ++b)
    for (std::size_t i = 0; i < s; ++i)
      for (std::size_t j = 0; j < s; ++j)
        out[(b * s + i) * s + j] =
            by_relative[static_cast<std::size_t>(at(b, j) - at(b, i) + span)];
  return out;
}

std::unique_ptr<BertProgram> declare_bert(Device& device, DType precision,
                                          const BertProgramOptions& options) {
  const BertConfig& c = options.config;
  c.validate("model");
  if (options.shape.batch < 1 || options.shape.seq < 1)
    throw ConfigError("batch and sequence length must be positive");
  if (options.head.kind == TaskHead::Kind::classification && options.head.num_labels < 1)
    throw ConfigError(fmt::format("num_labels must be >= 1, got {}", options.head.num_labels));
  // Packed inference rows give each token's position, restarting per text
  // (the embedding kernel checks each against the table): such a row is
  // only a token count to the linears and may be longer than the positions.
  const bool positions_per_token = options.packed_sequences > 0 && !options.training;
  if (options.shape.seq > c.max_position_embeddings && !positions_per_token) {
    throw ConfigError(fmt::format("sequence length {} exceeds max_position_embeddings {}",
                                  options.shape.seq, c.max_position_embeddings));
  }
  if (const auto problem =
          families::model_family(c.model_type).sequence_problem(c, options.shape.seq, {});
      !problem.empty())
    throw ConfigError(problem);
  for (const std::int64_t layer : options.recompute) {
    if (layer < 0 || layer >= c.num_hidden_layers)
      throw ConfigError(
          fmt::format("recompute: layer {} does not exist (the model has layers 0-{})", layer,
                      c.num_hidden_layers - 1));
  }
  auto out = std::make_unique<BertProgram>(device, precision);
  Program& p = out->program;
  p.set_products(options.products);
  const std::int64_t t = options.shape.batch * options.shape.seq;
  out->ids = p.tensor("input_ids", "inputs", {t}, DType::i32);
  out->types = p.tensor("token_type_ids", "inputs", {t}, DType::i32);
  out->type_vocab_size = c.type_vocab_size;
  if (families::model_family(c.model_type).relative_buckets() > 0)
    out->relative_buckets =
        p.tensor("relative buckets", "inputs",
                 {options.shape.batch, options.shape.seq, options.shape.seq}, DType::i32);
  out->mask =
      p.tensor("attention_mask", "inputs", {options.shape.batch, options.shape.seq}, DType::i32);
  if (options.training) out->rng = p.tensor("dropout rng", "inputs", {2}, DType::i32);
  if (options.packed_sequences > 0) {
    const bool trains = options.training && options.head.kind != TaskHead::Kind::classification;
    const bool infers =
        !options.training && (options.head.kind == TaskHead::Kind::question_answering ||
                              (options.head.kind == TaskHead::Kind::pretraining && !options.heads));
    if (!trains && !infers)
      throw ConfigError(
          "packed rows: pre-training, question answering (training and inference) and the "
          "encoder without heads (inference) only in this version");
    out->positions = p.tensor("position ids", "inputs", {t}, DType::i32);
  }
  const PipelineStage& stage = options.stage;
  const std::int64_t last = stage.last_layer < 0 ? c.num_hidden_layers : stage.last_layer;
  if (stage.first_layer < 0 || stage.first_layer > last || last > c.num_hidden_layers ||
      (stage.embeddings && stage.first_layer != 0) ||
      (stage.heads && last != c.num_hidden_layers) ||
      (!options.training && !(stage.embeddings && stage.heads))) {
    throw ConfigError(
        fmt::format("pipeline stage with layers {}-{}{}{} does not fit a model of {} layers",
                    stage.first_layer, last - 1, stage.embeddings ? ", embeddings" : "",
                    stage.heads ? ", heads" : "", c.num_hidden_layers));
  }
  Builder builder(*out, options);
  int x = -1;
  if (stage.embeddings) {
    x = builder.embeddings();
  } else {
    builder.skip_streams_before(stage.first_layer);
    x = builder.stage_input();
  }
  for (std::int64_t l = stage.first_layer; l < last; ++l)
    x = builder.family().encoder_layer(builder, l, x);
  if (stage.heads) {
    x = builder.family().after_encoder(builder, x);
    if (!stage.embeddings && options.head.kind == TaskHead::Kind::pretraining)
      builder.tied_word_embeddings();
    builder.heads(x);
  } else {
    builder.stage_output(x);
  }
  builder.finish();
  return out;
}

}  // namespace polyhal
