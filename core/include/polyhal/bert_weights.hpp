#pragma once
/// @file bert_weights.hpp
/// BertForPreTraining weights on the host, under Hugging Face names
/// ("bert.encoder.layer.0.attention.self.query.weight", "cls.predictions.bias").
#include <cstdint>
#include <filesystem>

#include "polyhal/bert_config.hpp"
#include "polyhal/safetensors.hpp"

namespace polyhal {

/// Every tensor BertForPreTraining has, with its shape (the decoder weight is
/// tied to the word embeddings and not listed).
std::vector<std::pair<std::string, Shape>> bert_tensor_shapes(const BertConfig& config);

/// Seeded initialisation as Hugging Face does it: normal(0, 0.02) weights and
/// embeddings, zero biases, LayerNorm weight 1 and bias 0.
TensorMap init_bert_weights(const BertConfig& config, std::uint64_t seed);

/// Loads weights from a .safetensors file and checks them against `config`.
/// Accepts names with or without the "bert." prefix and the old
/// LayerNorm.gamma/beta names. Throws ConfigError naming each missing, extra
/// or wrongly shaped tensor.
TensorMap load_bert_weights(const std::filesystem::path& file, const BertConfig& config);

/// Saves as Hugging Face does: "bert."-prefixed names, tied decoder omitted.
void save_bert_weights(const TensorMap& weights, DType dtype, const std::filesystem::path& file);

}  // namespace polyhal
