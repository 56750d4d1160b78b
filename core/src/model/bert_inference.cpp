#include "polyhal/bert_inference.hpp"

#include <fmt/format.h>

#include "polyhal/bert_weights.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

struct BertInference::State {
  Device& device;
  BertConfig config;
  BertShape shape;
  DType precision;
  bool with_heads;
  std::int64_t tokens;

  std::shared_ptr<Kernel> embedding, embedding_norm;
  struct Layer {
    std::shared_ptr<Kernel> qkv, attention, output, norm1, intermediate, ffn_output, norm2;
  };
  std::vector<Layer> layers;
  std::shared_ptr<Kernel> take_cls, pooler, nsp, mlm_transform, mlm_norm, mlm_decoder;

  // Device tensors: weights (kept alive for the kernels) and activations.
  std::vector<Tensor> weights;
  Tensor ids, types, mask, x, x1, qkv, context, attention_out, intermediate, ffn_out;
  Tensor cls, pooled, nsp_logits, mlm_hidden, mlm_normed, mlm_logits;
  bool loaded = false;

  State(Device& d, const BertConfig& c, BertShape s, DType p, bool h)
      : device(d), config(c), shape(s), precision(p), with_heads(h), tokens(s.batch * s.seq) {}

  std::vector<KernelDesc> descs;  // every kernel run per forward pass, in order

  std::shared_ptr<Kernel> prepare_step(KernelDesc desc) {
    descs.push_back(desc);
    return device.prepare_kernel(desc);
  }

  std::shared_ptr<Kernel> linear(std::int64_t rows, std::int64_t in, std::int64_t out,
                                 Activation act, bool residual = false) {
    return prepare_step({OpKind::linear, precision, {{rows, in}}, LinearAttrs{out, act, residual}});
  }
  std::shared_ptr<Kernel> layernorm(std::int64_t rows, bool residual) {
    return prepare_step(
        {OpKind::layernorm, precision,
         residual ? std::vector<Shape>{{rows, config.hidden_size}, {rows, config.hidden_size}}
                  : std::vector<Shape>{{rows, config.hidden_size}},
         LayerNormAttrs{config.layer_norm_eps, residual}});
  }

  void prepare() {
    const std::int64_t t = tokens, h = config.hidden_size, i = config.intermediate_size;
    embedding = prepare_step({OpKind::embedding, precision, {{t}, {t}}, EmbeddingAttrs{shape.seq}});
    embedding_norm = layernorm(t, false);
    for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
      Layer layer;
      layer.qkv = linear(t, h, 3 * h, Activation::none);
      layer.attention =
          prepare_step({OpKind::attention,
                        precision,
                        {{t, 3 * h}, {shape.batch, shape.seq}},
                        AttentionAttrs{shape.batch, shape.seq, config.num_attention_heads}});
      layer.output = linear(t, h, h, Activation::none, /*residual=*/true);
      layer.norm1 = layernorm(t, false);
      layer.intermediate = linear(t, h, i, Activation::gelu);
      layer.ffn_output = linear(t, i, h, Activation::none, /*residual=*/true);
      layer.norm2 = layernorm(t, false);
      layers.push_back(std::move(layer));
    }
    take_cls = prepare_step({OpKind::take_rows, precision, {{t, h}}, RowStrideAttrs{shape.seq}});
    pooler = linear(shape.batch, h, h, Activation::tanh);
    if (with_heads) {
      nsp = linear(shape.batch, h, 2, Activation::none);
      mlm_transform = linear(t, h, h, Activation::gelu);
      mlm_norm = layernorm(t, false);
      mlm_decoder = linear(t, h, config.vocab_size, Activation::none);
    }
  }

  std::vector<MemoryItem> memory_items() const {
    std::vector<MemoryItem> items;
    const auto w = dtype_size(precision);
    const std::uint64_t h = static_cast<std::uint64_t>(config.hidden_size);
    std::uint64_t matrix_params = 0, vector_params = 0;
    for (const auto& [name, s] : bert_tensor_shapes(config)) {
      (s.size() == 2 ? matrix_params : vector_params) +=
          static_cast<std::uint64_t>(element_count(s));
    }
    items.push_back({"weights", fmt::format("matrices and embeddings ({})", dtype_name(precision)),
                     matrix_params * w});
    items.push_back({"weights", "biases and LayerNorm (f32)", vector_params * 4});
    const std::uint64_t t = static_cast<std::uint64_t>(tokens);
    std::uint64_t activations = t * 3 * 4 /* ids, types, mask */ +
                                t * h * w * 5 /* x, x1, context, attention_out, ffn_out */ +
                                t * 3 * h * w +
                                t * static_cast<std::uint64_t>(config.intermediate_size) * w +
                                static_cast<std::uint64_t>(shape.batch) * h * w * 2;
    if (with_heads) {
      activations += t * h * w * 2 + t * static_cast<std::uint64_t>(config.vocab_size) * w +
                     static_cast<std::uint64_t>(shape.batch) * 2 * w;
    }
    items.push_back(
        {"activations", fmt::format("batch {} x seq {}", shape.batch, shape.seq), activations});
    std::uint64_t workspace = 0;
    auto add = [&](const std::shared_ptr<Kernel>& k) {
      if (k) workspace = std::max(workspace, k->workspace_bytes());
    };
    add(embedding);
    for (const auto& l : layers) {
      for (const auto& k : {l.qkv, l.attention, l.output, l.intermediate, l.ffn_output}) add(k);
    }
    add(pooler);
    add(mlm_decoder);
    // Kernels hold their own scratch; a device that shares scratch between
    // kernels needs only the largest. Reported as the largest single kernel.
    items.push_back({"workspace", "largest kernel scratch", workspace});
    return items;
  }

  Tensor upload(const HostTensor& host, DType type, const std::string& name) {
    Tensor t = device.allocate_tensor(type, host.shape, name);
    std::vector<std::byte> staging(t.bytes());
    convert(host.values.data(), DType::f32, staging.data(), type, host.values.size());
    device.copy_from_host(*t.buffer, staging.data(), staging.size());
    weights.push_back(t);
    return t;
  }

  const HostTensor& get(const TensorMap& map, const std::string& name) const {
    auto it = map.find(name);
    if (it == map.end()) throw ConfigError(fmt::format("weights: missing tensor '{}'", name));
    return it->second;
  }

  Tensor matrix(const TensorMap& map, const std::string& name) {
    return upload(get(map, name), precision, name);
  }
  Tensor vec(const TensorMap& map, const std::string& name) {
    return upload(get(map, name), DType::f32, name);
  }

  void bind_linear(Kernel& kernel, const TensorMap& map, const std::string& prefix) {
    const std::array constants{matrix(map, prefix + ".weight"), vec(map, prefix + ".bias")};
    kernel.set_constants(constants);
  }
  void bind_norm(Kernel& kernel, const TensorMap& map, const std::string& prefix) {
    const std::array constants{vec(map, prefix + ".weight"), vec(map, prefix + ".bias")};
    kernel.set_constants(constants);
  }

  void load(const TensorMap& map) {
    const std::int64_t t = tokens, h = config.hidden_size;
    const Tensor word = matrix(map, "bert.embeddings.word_embeddings.weight");
    const std::array tables{word, matrix(map, "bert.embeddings.position_embeddings.weight"),
                            matrix(map, "bert.embeddings.token_type_embeddings.weight")};
    embedding->set_constants(tables);
    bind_norm(*embedding_norm, map, "bert.embeddings.LayerNorm");
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const std::string p = fmt::format("bert.encoder.layer.{}.", l);
      // Q, K and V stacked into one [3H, H] projection: one GEMM, not three.
      HostTensor w{{3 * h, h}, {}}, b{{3 * h}, {}};
      for (const char* part : {"query", "key", "value"}) {
        const auto& pw = get(map, p + "attention.self." + part + ".weight").values;
        const auto& pb = get(map, p + "attention.self." + part + ".bias").values;
        w.values.insert(w.values.end(), pw.begin(), pw.end());
        b.values.insert(b.values.end(), pb.begin(), pb.end());
      }
      const std::array qkv_constants{upload(w, precision, p + "qkv.weight"),
                                     upload(b, DType::f32, p + "qkv.bias")};
      layers[l].qkv->set_constants(qkv_constants);
      bind_linear(*layers[l].output, map, p + "attention.output.dense");
      bind_norm(*layers[l].norm1, map, p + "attention.output.LayerNorm");
      bind_linear(*layers[l].intermediate, map, p + "intermediate.dense");
      bind_linear(*layers[l].ffn_output, map, p + "output.dense");
      bind_norm(*layers[l].norm2, map, p + "output.LayerNorm");
    }
    bind_linear(*pooler, map, "bert.pooler.dense");
    if (with_heads) {
      bind_linear(*nsp, map, "cls.seq_relationship");
      bind_linear(*mlm_transform, map, "cls.predictions.transform.dense");
      bind_norm(*mlm_norm, map, "cls.predictions.transform.LayerNorm");
      const std::array decoder_constants{
          word, vec(map, "cls.predictions.bias")};  // tied to the word embeddings
      mlm_decoder->set_constants(decoder_constants);
    }
    const auto act = [&](const Shape& s, const std::string& name) {
      return device.allocate_tensor(precision, s, name);
    };
    ids = device.allocate_tensor(DType::i32, {t}, "input_ids");
    types = device.allocate_tensor(DType::i32, {t}, "token_type_ids");
    mask = device.allocate_tensor(DType::i32, {shape.batch, shape.seq}, "attention_mask");
    x = act({t, h}, "hidden");
    x1 = act({t, h}, "attention block output");
    qkv = act({t, 3 * h}, "qkv");
    context = act({t, h}, "attention context");
    attention_out = act({t, h}, "attention projection");
    intermediate = act({t, config.intermediate_size}, "ffn intermediate");
    ffn_out = act({t, h}, "ffn output");
    cls = act({shape.batch, h}, "cls rows");
    pooled = act({shape.batch, h}, "pooled");
    if (with_heads) {
      nsp_logits = act({shape.batch, 2}, "nsp logits");
      mlm_hidden = act({t, h}, "mlm transform");
      mlm_normed = act({t, h}, "mlm normed");
      mlm_logits = act({t, config.vocab_size}, "mlm logits");
    }
    // The forward pass, in order (see the header for the maths).
    step(embedding, {ids, types}, x1);
    step(embedding_norm, {x1}, x);
    for (auto& layer : layers) {
      step(layer.qkv, {x}, qkv);
      step(layer.attention, {qkv, mask}, context);
      step(layer.output, {context, x}, attention_out);  // residual added in the epilogue
      step(layer.norm1, {attention_out}, x1);
      step(layer.intermediate, {x1}, intermediate);
      step(layer.ffn_output, {intermediate, x1}, ffn_out);
      step(layer.norm2, {ffn_out}, x);
    }
    step(take_cls, {x}, cls);
    step(pooler, {cls}, pooled);
    if (with_heads) {
      step(nsp, {pooled}, nsp_logits);
      step(mlm_transform, {x}, mlm_hidden);
      step(mlm_norm, {mlm_hidden}, mlm_normed);
      step(mlm_decoder, {mlm_normed}, mlm_logits);
    }
    loaded = true;
  }

  /// One kernel call with its tensors, bound once in load() so that a
  /// forward pass is a walk over this list with no allocation.
  struct Step {
    std::shared_ptr<Kernel> kernel;
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
  };
  std::vector<Step> steps;

  void step(const std::shared_ptr<Kernel>& k, std::initializer_list<Tensor> in, const Tensor& out) {
    steps.push_back({k, in, {out}});
  }

  void copy_out(const Tensor& t, std::vector<float>& out) {
    std::vector<std::byte> staging(t.bytes());
    device.copy_to_host(staging.data(), *t.buffer, staging.size());
    out.resize(static_cast<std::size_t>(t.numel()));
    convert(staging.data(), t.dtype, out.data(), DType::f32, out.size());
  }

  void forward(const BertInputs& in, BertOutputs* out) {
    if (!loaded) throw RuntimeFailure("BertInference::run before load_weights");
    const auto expected = static_cast<std::size_t>(tokens);
    if (in.input_ids.size() != expected || in.token_type_ids.size() != expected ||
        in.attention_mask.size() != expected) {
      throw RuntimeFailure(fmt::format("inputs must hold batch {} x seq {} = {} tokens each",
                                       shape.batch, shape.seq, tokens));
    }
    device.copy_from_host(*ids.buffer, in.input_ids.data(), ids.bytes());
    device.copy_from_host(*types.buffer, in.token_type_ids.data(), types.bytes());
    device.copy_from_host(*mask.buffer, in.attention_mask.data(), mask.bytes());

    for (const auto& s : steps) s.kernel->run(s.inputs, s.outputs);
    device.synchronize();
    if (out != nullptr) {
      copy_out(x, out->last_hidden_state);
      copy_out(pooled, out->pooled);
      if (with_heads) {
        copy_out(mlm_logits, out->mlm_logits);
        copy_out(nsp_logits, out->nsp_logits);
      }
    }
  }
};

BertInference::BertInference(Device& device, const BertConfig& config, BertShape shape,
                             DType precision, bool with_heads)
    : state_(std::make_unique<State>(device, config, shape, precision, with_heads)) {
  config.validate("model");
  if (shape.batch < 1 || shape.seq < 1)
    throw ConfigError("batch and sequence length must be positive");
  if (shape.seq > config.max_position_embeddings) {
    throw ConfigError(fmt::format("sequence length {} exceeds max_position_embeddings {}",
                                  shape.seq, config.max_position_embeddings));
  }
  state_->prepare();
}

BertInference::~BertInference() = default;

MemoryReport BertInference::plan_memory() const {
  return state_->device.plan_memory(state_->memory_items());
}
void BertInference::load_weights(const TensorMap& weights) {
  state_->load(weights);
}
void BertInference::run(const BertInputs& inputs, BertOutputs* outputs) {
  state_->forward(inputs, outputs);
}
const BertConfig& BertInference::config() const {
  return state_->config;
}
BertShape BertInference::shape() const {
  return state_->shape;
}

std::optional<double> BertInference::estimate_seconds() const {
  double total = 0.0;
  for (const auto& desc : state_->descs) {
    const auto seconds = state_->device.estimate_seconds(desc);
    if (!seconds) return std::nullopt;
    total += *seconds;
  }
  return total;
}

double BertInference::flops() const {
  const auto& c = state_->config;
  const double t = static_cast<double>(state_->tokens), h = static_cast<double>(c.hidden_size);
  const double i = static_cast<double>(c.intermediate_size),
               s = static_cast<double>(state_->shape.seq);
  const double per_layer = 2.0 * t * (3 * h * h + h * h + 2 * h * i) + 4.0 * t * s * h;
  double total = static_cast<double>(c.num_hidden_layers) * per_layer +
                 2.0 * static_cast<double>(state_->shape.batch) * h * h;
  if (state_->with_heads) total += 2.0 * t * h * (h + static_cast<double>(c.vocab_size));
  return total;
}

}  // namespace polyhal
