#pragma once
/// @file hf_directory.hpp
/// Hugging Face's model directory, as save_pretrained writes it.
#include <filesystem>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// Writes a Hugging Face directory as save_pretrained does: config.json for
/// `head`'s model class, model.safetensors, and `vocab` copied in as
/// vocab.txt when given, with tokenizer_config.json (`lower_case`), so
/// from_pretrained(dir), AutoTokenizer and checkpoint.init all take it.
void export_hf_directory(const std::filesystem::path& dir, const BertConfig& model,
                         const TaskHead& head, const TensorMap& weights,
                         const std::filesystem::path& vocab = {}, bool lower_case = true);

/// Whether `dir` holds a whole exported model: its config.json and
/// model.safetensors (config.json is written last, so a directory a kill cut
/// short has none).
bool holds_hf_model(const std::filesystem::path& dir);

/// The weights of a model directory: Hugging Face's model.safetensors, else
/// the one TensorFlow checkpoint in it (Google's bert_model.ckpt, a TF2
/// ckpt-N). ConfigError naming the directory when it holds neither, or
/// several checkpoints (then naming them, to pick one).
std::filesystem::path model_weights_in(const std::filesystem::path& dir);

}  // namespace polyhal
