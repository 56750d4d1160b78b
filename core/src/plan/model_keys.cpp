// model.dir: a Hugging Face or sentence-transformers model directory read
// whole, as those libraries read it, at plan time (the config keeps model.dir
// as written). It stands for the keys a user would otherwise give one by
// one, each only where the config does not give it:
//   model.hf_config  DIR/config.json
//   model.weights    DIR/model.safetensors (or its shards, or the one TF checkpoint)
//   data.vocab       DIR/tokenizer.json, else DIR/vocab.txt (its tokenizer_config.json beside
//                    it), else DIR/vocab.json + merges.txt (RoBERTa's slow files), as
//                    transformers' fast tokenizer prefers them
//   model.seq_len    sentence_bert_config.json's max_seq_length
// Pooling and normalisation (inference.pooling/normalize auto) are read
// from DIR's 1_Pooling/config.json and modules.json when the run needs them.
//   model.head       a fine-tuned export's (config.json's architectures), for
//                    the tasks that run inference
// A key the config gives as well wins, and the run says once what it
// changes against the directory.
#include "plan/model_keys.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "model/families/model_family.hpp"
#include "model/sentence_modules.hpp"
#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/tokenizer_files.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// The config's own `key` replaces what the directory gives: said once.
void say_override(const RunConfig& config, const std::string& key, const std::string& given,
                  const std::string& directory_gives) {
  spdlog::warn("{}: {} {} is used instead of model.dir's {}", config.locate(key), key, given,
               directory_gives);
}

/// A fine-tuned export (config.json's architectures: *ForSequenceClassification,
/// *ForQuestionAnswering) runs with its head unless the config says otherwise:
/// model.head and, for a classifier, model.num_labels from id2label.
void take_directory_head(const RunConfig& config, ModelKeys& keys) {
  std::optional<TaskHead> head;
  try {
    head = read_hf_head(keys.hf_config);
  } catch (const ConfigError& e) {
    config.fail("model.dir", e.what());
  }
  if (!head || config.sets("model.head") || config.sets("model.heads")) return;
  const bool classifier = head->kind == TaskHead::Kind::classification;
  keys.head = classifier ? "classification" : "question_answering";
  keys.head_source = keys.hf_config.string() + "'s architectures";
  if (classifier) {
    if (config.sets("model.num_labels") && config.model.num_labels != head->num_labels)
      config.fail("model.num_labels",
                  fmt::format("{}, but {} has {} labels (id2label): leave the key out",
                              config.model.num_labels, keys.hf_config.string(), head->num_labels));
    keys.num_labels = head->num_labels;
  }
  std::string architecture = hf_architecture(*head);  // the family's class where the file reads
  try {
    architecture =
        families::model_family(read_hf_config(keys.hf_config).model_type).architecture(*head);
  } catch (const ConfigError&) {
    // the config's own error comes where the model is read
  }
  spdlog::info("model.dir: {} is a fine-tuned {}: model.head {}{}", keys.dir.string(), architecture,
               keys.head, classifier ? fmt::format(", {} labels", head->num_labels) : "");
}

/// The keys as the config gives them, each with where it came from.
ModelKeys written_keys(const RunConfig& config) {
  ModelKeys keys;
  const ModelSection& m = config.model;
  keys.dir = m.dir;
  keys.hf_config = m.hf_config;
  keys.weights = m.weights;
  keys.weights_key = "model.weights";
  keys.vocab = config.data.vocab;
  keys.vocab_source = config.locate("data.vocab");
  keys.seq_len = m.seq_len;
  keys.seq_len_source = config.locate("model.seq_len");
  keys.head = m.head;
  keys.heads = m.heads;
  keys.num_labels = m.num_labels;
  keys.head_source = config.locate(config.sets("model.heads") ? "model.heads" : "model.head");
  return keys;
}

}  // namespace

/// What model.dir stands for, into `keys` where the config gives none.
void read_model_directory(const RunConfig& config, ModelKeys& keys) {
  const std::filesystem::path dir = config.model.dir;
  if (!std::filesystem::is_directory(dir))
    config.fail("model.dir",
                fmt::format("{} is not a directory: name the folder that holds the model's "
                            "config.json (a Hugging Face or sentence-transformers model)",
                            dir.string()));
  const auto config_json = dir / "config.json";
  if (!std::filesystem::exists(config_json))
    config.fail("model.dir",
                fmt::format("{} has no config.json: a Hugging Face model directory has "
                            "config.json and model.safetensors (a TensorFlow checkpoint "
                            "converts with `polyhal convert`)",
                            dir.string()));
  if (config.sets("model.hf_config")) {
    say_override(config, "model.hf_config", config.model.hf_config.string(), config_json.string());
  } else {
    if (config.sets("model.preset"))
      spdlog::warn("{}: model.preset {} is not used: the dimensions are {}'s",
                   config.locate("model.preset"), config.model.preset, config_json.string());
    keys.hf_config = config_json;
  }
  if (config.sets("model.weights")) {
    say_override(config, "model.weights", config.model.weights.string(),
                 "weights (" + dir.string() + ")");
  } else {
    try {
      keys.weights = model_weights_in(dir);
      keys.weights_key = "model.dir";
    } catch (const ConfigError& e) {
      config.fail("model.dir", e.what());
    }
  }
  if (config.schema && config.schema->has(TaskTrait::runs_inference))
    take_directory_head(config, keys);
  // The tokenizer.json first, as transformers' fast tokenizer reads it
  // (current transformers saves it alone); else a vocab.txt with the
  // tokenizer files beside it; else RoBERTa's slow vocab.json and merges.txt,
  // else XLM-R's sentencepiece.bpe.model.
  const bool slow_bpe =
      std::filesystem::exists(dir / "vocab.json") && std::filesystem::exists(dir / "merges.txt");
  const auto vocabulary = std::filesystem::exists(dir / "tokenizer.json") ? dir / "tokenizer.json"
                          : std::filesystem::exists(dir / "vocab.txt")    ? dir / "vocab.txt"
                          : slow_bpe                                      ? dir / "vocab.json"
                          : std::filesystem::exists(dir / "sentencepiece.bpe.model")
                              ? dir / "sentencepiece.bpe.model"
                              : std::filesystem::path();
  if (!vocabulary.empty()) {
    if (config.sets("data.vocab"))
      say_override(config, "data.vocab", "(given)", vocabulary.string());
    else {
      keys.vocab = vocabulary;
      keys.vocab_source = "model.dir " + dir.string();
    }
  }
  const auto st_file = dir / "sentence_bert_config.json";
  std::optional<SentenceBertSettings> st;
  try {
    st = read_sentence_bert_settings(st_file);
  } catch (const ConfigError& e) {
    config.fail("model.dir", e.what());
  }
  if (!st) return;
  if (st->do_lower_case && !vocabulary.empty()) {
    // sentence-transformers lower-cases the text (str.lower) before its
    // tokenizer; polyhal lower-cases only in the tokenizer, which is the
    // same text when that tokenizer lower-cases anyway (an uncased model).
    const auto files = read_tokenizer_files(vocabulary);
    if (files.lower_case && !*files.lower_case)
      spdlog::warn(
          "{}: do_lower_case true before a tokenizer that keeps case ({}): polyhal lower-cases "
          "only in the tokenizer, which also strips accents; set data.lower_case: true for "
          "that, or expect other embeddings than sentence-transformers' for text with capitals",
          st_file.string(), (dir / "tokenizer_config.json").string());
  }
  if (!st->max_seq_length) return;
  const std::int64_t longest = *st->max_seq_length;
  if (!config.sets("model.seq_len")) {
    keys.seq_len = longest;
    keys.seq_len_source = st_file.string() + "'s max_seq_length";
  } else if (config.model.seq_len != longest) {
    spdlog::warn(
        "{}: model.seq_len {} truncates at {} tokens where sentence-transformers truncates at {} "
        "(max_seq_length of {}): text longer than {} tokens gets another embedding than theirs",
        config.locate("model.seq_len"), config.model.seq_len, config.model.seq_len, longest,
        st_file.string(), std::min(config.model.seq_len, longest));
  }
}

ModelKeys resolve_model_keys(const RunConfig& config) {
  ModelKeys keys = written_keys(config);
  if (!config.model.dir.empty()) read_model_directory(config, keys);
  if (config.data.source == "text" && keys.vocab.empty())
    config.fail("data.vocab",
                fmt::format("required when data.source is text: model.dir {} has neither "
                            "tokenizer.json, vocab.txt nor vocab.json with merges.txt",
                            keys.dir.string()));
  return keys;
}

}  // namespace polyhal
