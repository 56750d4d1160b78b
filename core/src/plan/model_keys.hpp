#pragma once
// The model keys as a run uses them: the config's as written, and where it
// gives none, what model.dir stands for (a Hugging Face or
// sentence-transformers directory read whole, as those libraries read it).
// The config layer keeps model.dir as written; this is its one reader.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

/// A value and the key or file it came from ("model.seq_len at c.yaml:4",
/// "DIR/sentence_bert_config.json's max_seq_length").
struct ModelKeys {
  std::filesystem::path dir;        ///< model.dir as written
  std::filesystem::path hf_config;  ///< model.hf_config, else DIR/config.json
  std::filesystem::path weights;    ///< model.weights, else DIR's model file
  std::string weights_key;          ///< "model.weights" or "model.dir"
  std::filesystem::path vocab;      ///< data.vocab, else DIR/vocab.txt, else DIR/tokenizer.json
  std::string vocab_source;
  std::int64_t seq_len = 128;  ///< model.seq_len, else max_seq_length
  std::string seq_len_source;
  /// The runs_inference tasks' head: model.head, else a fine-tuned
  /// directory's (config.json's architectures), with its label count.
  std::string head = "none";
  bool heads = false;  ///< model.heads (the MLM and NSP heads)
  std::int64_t num_labels = 2;
  std::string head_source;
};

/// `config`'s model keys, model.dir's files filling those it does not give
/// (said once where a given key replaces the directory's). ConfigError at
/// model.dir for a directory that is not a model, or a file in it that
/// cannot be read as its library reads it.
ModelKeys resolve_model_keys(const RunConfig& config);

/// The tokenizer options for `vocab` (ModelPlan::tokenizer says the rule).
/// Throws ConfigError naming the file for a setting polyhal does not implement.
TokenizerOptions resolve_tokenizer_options(const RunConfig& config,
                                           const std::filesystem::path& vocab);

}  // namespace polyhal
