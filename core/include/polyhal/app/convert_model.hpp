#pragma once
/// @file convert_model.hpp
/// `polyhal convert`: a TensorFlow BERT checkpoint (Google's names: the
/// released models, the MLPerf phase-1 checkpoint, the vendors' TensorFlow
/// recipes) into a Hugging Face directory, once, so that every later run,
/// transformers and AutoTokenizer read it directly.
#include <filesystem>
#include <string>
#include <vector>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

struct ConvertOptions {
  /// A TensorFlow checkpoint prefix (or its .index file), or a directory
  /// holding one (Google's uncased_L-12_H-768_A-12/).
  std::filesystem::path input;
  std::filesystem::path output;       ///< the Hugging Face directory to write
  std::filesystem::path bert_config;  ///< empty: bert_config.json or config.json beside the input
  std::filesystem::path vocab;        ///< empty: vocab.txt beside the input, if any
  bool lower_case = true;             ///< tokenizer_config.json's do_lower_case
  /// "hf": a Hugging Face directory; "checkpoint": a polyhal checkpoint
  /// directory with the optimizer state (convert_checkpoint.hpp).
  std::string to = "hf";
};

struct ConvertResult {
  std::filesystem::path checkpoint;  ///< the prefix read
  std::filesystem::path bert_config, vocab;
  BertConfig model;
  TaskHead head;  ///< found from the tensors: pre-training, SQuAD or a classifier
  std::size_t tensors = 0;
  std::vector<std::string> training_state;  ///< left out: optimizer slots, global_step
};

/// A checkpoint read and checked, nothing written yet.
struct TfModel {
  ConvertResult result;
  TensorMap weights;  ///< under Hugging Face names
};
/// Reads and checks (every tensor of the model class, right shapes, finite
/// values) the checkpoint `options.input` names, with its bert_config.json
/// and vocab.txt found as convert_tf_to_hf says. Throws ConfigError naming
/// the file and each problem.
TfModel read_tf_model(const ConvertOptions& options);

/// Reads, checks (every tensor of the model class, right shapes, finite
/// values) and writes. Throws ConfigError naming the file and each problem;
/// the output is written only when everything was read.
ConvertResult convert_tf_to_hf(const ConvertOptions& options);

}  // namespace polyhal
