#include "polyhal/bert_weights.hpp"

#include <fmt/format.h>

#include <random>
#include <set>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

// Checkpoint tensors that are buffers or tied copies, not parameters.
bool ignorable(const std::string& name) {
  return name.ends_with("embeddings.position_ids") || name == "cls.predictions.decoder.weight" ||
         name == "cls.predictions.decoder.bias";
}

/// Canonical Hugging Face name: "bert." prefix for the encoder, and
/// LayerNorm.weight/bias for the old gamma/beta.
std::string canonical_name(std::string name) {
  if (!name.starts_with("bert.") && !name.starts_with("cls.")) name = "bert." + name;
  for (const auto& [old_suffix, new_suffix] : {std::pair{"LayerNorm.gamma", "LayerNorm.weight"},
                                               std::pair{"LayerNorm.beta", "LayerNorm.bias"}}) {
    const std::string from = old_suffix;
    if (name.ends_with(from)) name = name.substr(0, name.size() - from.size()) + new_suffix;
  }
  return name;
}

}  // namespace

std::vector<std::pair<std::string, Shape>> bert_tensor_shapes(const BertConfig& c) {
  const std::int64_t h = c.hidden_size, i = c.intermediate_size;
  std::vector<std::pair<std::string, Shape>> shapes{
      {"bert.embeddings.word_embeddings.weight", {c.vocab_size, h}},
      {"bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, h}},
      {"bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}},
      {"bert.embeddings.LayerNorm.weight", {h}},
      {"bert.embeddings.LayerNorm.bias", {h}},
  };
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("bert.encoder.layer.{}.", l);
    for (const char* proj : {"attention.self.query", "attention.self.key", "attention.self.value",
                             "attention.output.dense"}) {
      shapes.push_back({p + proj + ".weight", {h, h}});
      shapes.push_back({p + proj + ".bias", {h}});
    }
    shapes.push_back({p + "attention.output.LayerNorm.weight", {h}});
    shapes.push_back({p + "attention.output.LayerNorm.bias", {h}});
    shapes.push_back({p + "intermediate.dense.weight", {i, h}});
    shapes.push_back({p + "intermediate.dense.bias", {i}});
    shapes.push_back({p + "output.dense.weight", {h, i}});
    shapes.push_back({p + "output.dense.bias", {h}});
    shapes.push_back({p + "output.LayerNorm.weight", {h}});
    shapes.push_back({p + "output.LayerNorm.bias", {h}});
  }
  shapes.insert(shapes.end(), {
                                  {"bert.pooler.dense.weight", {h, h}},
                                  {"bert.pooler.dense.bias", {h}},
                                  {"cls.predictions.transform.dense.weight", {h, h}},
                                  {"cls.predictions.transform.dense.bias", {h}},
                                  {"cls.predictions.transform.LayerNorm.weight", {h}},
                                  {"cls.predictions.transform.LayerNorm.bias", {h}},
                                  {"cls.predictions.bias", {c.vocab_size}},
                                  {"cls.seq_relationship.weight", {2, h}},
                                  {"cls.seq_relationship.bias", {2}},
                              });
  return shapes;
}

TensorMap init_bert_weights(const BertConfig& config, std::uint64_t seed) {
  TensorMap weights;
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const auto& [name, shape] : bert_tensor_shapes(config)) {
    HostTensor t{shape, std::vector<float>(static_cast<std::size_t>(element_count(shape)), 0.0f)};
    if (name.ends_with("LayerNorm.weight")) {
      std::fill(t.values.begin(), t.values.end(), 1.0f);
    } else if (name.ends_with(".weight")) {
      for (auto& v : t.values) v = normal(generator);
    }
    weights.emplace(name, std::move(t));
  }
  return weights;
}

TensorMap load_bert_weights(const std::filesystem::path& file, const BertConfig& config) {
  TensorMap raw = read_safetensors(file);
  TensorMap weights;
  std::vector<std::string> extra;
  for (auto& [name, tensor] : raw) {
    if (ignorable(name) || ignorable(canonical_name(name))) continue;
    weights[canonical_name(name)] = std::move(tensor);
  }
  std::vector<std::string> problems;
  std::set<std::string> expected;
  for (const auto& [name, shape] : bert_tensor_shapes(config)) {
    expected.insert(name);
    auto it = weights.find(name);
    if (it == weights.end()) {
      problems.push_back(fmt::format("missing tensor '{}' {}", name, shape_string(shape)));
    } else if (it->second.shape != shape) {
      problems.push_back(fmt::format("tensor '{}' has shape {}, the model config needs {}", name,
                                     shape_string(it->second.shape), shape_string(shape)));
    }
  }
  for (const auto& [name, tensor] : weights) {
    if (!expected.contains(name)) problems.push_back(fmt::format("unexpected tensor '{}'", name));
  }
  if (!problems.empty()) {
    std::string message = fmt::format("{}: {} problem{} with the weights:", file.string(),
                                      problems.size(), problems.size() == 1 ? "" : "s");
    const std::size_t shown = std::min<std::size_t>(problems.size(), 10);
    for (std::size_t i = 0; i < shown; ++i) message += "\n  " + problems[i];
    if (problems.size() > shown)
      message += fmt::format("\n  ... and {} more", problems.size() - shown);
    throw ConfigError(message);
  }
  return weights;
}

void save_bert_weights(const TensorMap& weights, DType dtype, const std::filesystem::path& file) {
  write_safetensors(weights, dtype, file);
}

}  // namespace polyhal
