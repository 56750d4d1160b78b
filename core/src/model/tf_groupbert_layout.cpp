#include "model/tf_groupbert_layout.hpp"

#include <fmt/format.h>

#include <array>
#include <set>
#include <string_view>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

constexpr std::string_view kLayerPrefix = "bert.encoder.layer.";

/// Graphcore's part of a layer name (after "bert.encoder.layer.L.") -> polyhal's.
constexpr std::array<std::pair<std::string_view, std::string_view>, 15> kRenames{{
    {"convolution.prenorm.LayerNorm.", "convolution.prenorm."},
    {"convolution.pre.glu.values.dense.", "convolution.glu_values."},
    {"convolution.pre.glu.gates.dense.", "convolution.glu_gates."},
    {"convolution.dwconv.LayerNorm.", "convolution.conv_norm."},
    {"convolution.post.dense.", "convolution.post."},
    {"feed_forward_1.prenorm.LayerNorm.", "feed_forward_1.prenorm."},
    {"feed_forward_1.intermediate.dense.", "feed_forward_1.intermediate."},
    {"feed_forward_1.output.mixer.dense.", "feed_forward_1.mixer."},
    {"feed_forward_1.output.dense.", "feed_forward_1.output."},
    {"feed_forward_2.prenorm.LayerNorm.", "feed_forward_2.prenorm."},
    {"feed_forward_2.intermediate.dense.", "feed_forward_2.intermediate."},
    {"feed_forward_2.output.mixer.dense.", "feed_forward_2.mixer."},
    {"feed_forward_2.output.dense.", "feed_forward_2.output."},
    {"attention.prenorm.LayerNorm.", "attention.prenorm."},
    {"attention.projection.dense.", "attention.output."},
}};

/// "bert.encoder.layer.3.rest" -> {"bert.encoder.layer.3.", "rest"}.
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name) {
  if (!name.starts_with(kLayerPrefix)) return std::nullopt;
  const auto dot = name.find('.', kLayerPrefix.size());
  if (dot == std::string::npos) return std::nullopt;
  return std::pair{name.substr(0, dot + 1), name.substr(dot + 1)};
}

/// TensorFlow's dwconv weight [K, C, N] as polyhal's [N, C, K]
/// (PyTorch Conv1d(N, N, K, groups=N/C)): the same cross-correlation.
HostTensor conv_weight(const HostTensor& tf, const std::string& name) {
  if (tf.shape.size() != 3)
    throw ConfigError(
        fmt::format("tensor '{}' (Graphcore's dwconv/weight) has {} dimensions, "
                    "expected [kernel, group size, hidden]",
                    name, tf.shape.size()));
  const auto k = static_cast<std::size_t>(tf.shape[0]);
  const auto c = static_cast<std::size_t>(tf.shape[1]);
  const auto n = static_cast<std::size_t>(tf.shape[2]);
  HostTensor out{{tf.shape[2], tf.shape[1], tf.shape[0]}, std::vector<float>(tf.values.size())};
  for (std::size_t tap = 0; tap < k; ++tap)
    for (std::size_t in = 0; in < c; ++in)
      for (std::size_t channel = 0; channel < n; ++channel)
        out.values[(channel * c + in) * k + tap] = tf.values[(tap * c + in) * n + channel];
  return out;
}

/// The fused kernel, transposed to [3N, N] by the generic mapping: rows
/// [0, N) are the query's outputs, then the key's, then the value's
/// (Graphcore splits qkv in that order).
void split_qkv(const HostTensor& fused, const std::string& layer, const std::string& name,
               TensorMap& out) {
  // Divided, not multiplied: a hostile shape [0, 2^62] must not overflow.
  if (fused.shape.size() != 2 || fused.shape[0] % 3 != 0 || fused.shape[0] / 3 != fused.shape[1])
    throw ConfigError(
        fmt::format("tensor '{}' (Graphcore's qkv_weight) has {} dimensions or "
                    "a first one other than 3 x the second",
                    name, fused.shape.size()));
  const auto rows = static_cast<std::size_t>(fused.shape[1]);
  const std::size_t part = rows * rows;
  const char* parts[] = {"query", "key", "value"};
  for (std::size_t p = 0; p < 3; ++p) {
    HostTensor t{{fused.shape[1], fused.shape[1]}, {}};
    t.values.assign(fused.values.begin() + static_cast<std::ptrdiff_t>(p * part),
                    fused.values.begin() + static_cast<std::ptrdiff_t>((p + 1) * part));
    out[fmt::format("{}attention.self.{}.weight", layer, parts[p])] = std::move(t);
  }
}

}  // namespace

bool has_graphcore_groupbert_layers(const TensorMap& weights) {
  for (const auto& [name, tensor] : weights)
    if (const auto split = split_layer(name); split && split->second.starts_with("convolution."))
      return true;
  return false;
}

TensorMap graphcore_groupbert_layout(TensorMap weights, bool fill_missing_biases) {
  TensorMap out;
  std::set<std::string> layers;
  for (auto& [name, tensor] : weights) {
    if (name == "LayerNorm/gamma" || name == "LayerNorm/beta") {
      out[name.ends_with("gamma") ? "bert.encoder.final_norm.weight"
                                  : "bert.encoder.final_norm.bias"] = std::move(tensor);
      continue;
    }
    const auto split = split_layer(name);
    if (!split) {
      out[name] = std::move(tensor);
      continue;
    }
    const auto& [layer, rest] = *split;
    layers.insert(layer);
    if (rest == "convolution.dwconv.weight") {
      out[layer + "convolution.conv.weight"] = conv_weight(tensor, name);
      continue;
    }
    if (rest == "attention.self.weight.qkv_weight") {
      split_qkv(tensor, layer, name, out);
      continue;
    }
    std::string renamed = name;
    for (const auto& [from, to] : kRenames)
      if (rest.starts_with(from)) renamed = layer + std::string(to) + rest.substr(from.size());
    out[renamed] = std::move(tensor);
  }
  if (!fill_missing_biases) return out;
  // A bias a config switched off is a bias of zeros, as wide as its kernel's outputs.
  auto zeros_beside = [&out](const std::string& weight, const std::string& bias) {
    const auto it = out.find(weight);
    // An empty weight could claim any row count: only a weight holding
    // values bounds the bias it implies.
    if (it == out.end() || out.contains(bias) || it->second.shape.empty() ||
        it->second.values.empty())
      return;
    const auto rows = it->second.shape[0];
    out[bias] = HostTensor{{rows}, std::vector<float>(static_cast<std::size_t>(rows), 0.0f)};
  };
  for (const auto& layer : layers) {
    for (const char* part : {"attention.self.query.", "attention.self.key.",
                             "attention.self.value.", "attention.output."})
      zeros_beside(layer + part + "weight", layer + part + "bias");
  }
  if (out.contains("cls.predictions.transform.dense.weight"))
    zeros_beside("bert.embeddings.word_embeddings.weight", "cls.predictions.bias");
  return out;
}

}  // namespace polyhal
