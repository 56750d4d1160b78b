#pragma once
/// @file tf_bert_weights.hpp
/// BERT weights from a TensorFlow checkpoint with Google's variable names
/// (google-research/bert modeling.py and run_pretraining.py, which the MLPerf
/// reference and the vendors' TensorFlow recipes keep), under the Hugging
/// Face names the rest of polyhal uses (polyhal/app/bert_weights.hpp).
/// Graphcore's TensorFlow GroupBERT variables (GroupBertModel) are read too,
/// under the names of docs/groupbert.md.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// Where a TensorFlow variable goes.
struct TfBertName {
  std::string hf;          ///< "bert.encoder.layer.0.attention.self.query.weight"
  bool transpose = false;  ///< a dense kernel, stored [in, out] by TensorFlow
};

/// Hugging Face's name for Google's BERT variable `tf_name`
/// ("bert/encoder/layer_0/attention/self/query/kernel"); empty for a name of
/// no BERT (the caller lists it).
std::optional<TfBertName> hf_name_of_tf_variable(const std::string& tf_name);

/// True for optimizer and training state a checkpoint carries beside the
/// weights: Adam/LAMB slots (adam_m, adam_v, lamb_m, lamb_v, ...),
/// global_step, loss-scale state, TF2's object graph and .OPTIMIZER_SLOT
/// entries.
bool is_tf_training_state(const std::string& tf_name);

/// What reading left out.
struct TfReadReport {
  std::vector<std::string> training_state;  ///< optimizer slots, global_step, ...
  std::vector<std::string> other;           ///< not numbers (strings, bools)
};

/// Every BERT tensor of the checkpoint `path` names (prefix or .index file)
/// under Hugging Face names, kernels transposed; training state left out and
/// listed in `report`; a name of no BERT kept as it is, so that the weight
/// check (check_bert_weights) lists it as unexpected. Throws ConfigError for
/// a damaged checkpoint.
TensorMap read_tf_bert_weights(const std::filesystem::path& path, TfReadReport* report = nullptr);

/// The optimizer state beside the weights: the first and second moments of
/// Adam/LAMB under the Hugging Face names of their variables, laid out as
/// the weights are (kernels transposed), and global_step when present.
struct TfOptimizerState {
  TensorMap m, v;
  std::optional<std::int64_t> global_step;
};
TfOptimizerState read_tf_optimizer_state(const std::filesystem::path& path);

}  // namespace polyhal
