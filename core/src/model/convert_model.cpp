#include "polyhal/app/convert_model.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

std::filesystem::path checkpoint_of(const std::filesystem::path& input) {
  if (std::filesystem::is_directory(input)) return tf_checkpoint_in(input, "as --input");
  if (!is_tf_checkpoint(input))
    throw ConfigError(
        fmt::format("{}: not a TensorFlow checkpoint (no {}.index); convert reads "
                    "TensorFlow checkpoints, and polyhal reads Hugging Face "
                    "directories and safetensors files as they are",
                    input.string(), input.string()));
  auto text = input.string();
  if (text.ends_with(".index")) text.resize(text.size() - 6);
  return text;
}

/// The model class the tensors belong to.
TaskHead head_of(const TensorMap& weights) {
  TaskHead head;
  if (weights.contains("qa_outputs.weight")) {
    head.kind = TaskHead::Kind::question_answering;
  } else if (const auto it = weights.find("classifier.weight");
             it != weights.end() && it->second.shape.size() == 2) {
    head.kind = TaskHead::Kind::classification;
    head.num_labels = it->second.shape[0];
  }
  return head;
}

/// The files of a Hugging Face model directory: one that holds any is
/// another model, which a convert into it would mix with this one.
constexpr const char* kModelFiles[] = {"config.json", "model.safetensors",
                                       "model.safetensors.index.json", "pytorch_model.bin",
                                       "tf_model.h5"};

/// Refuses an output that is a file or already holds a model, and removes
/// the temporary files of a convert into it that was killed.
void prepare_hf_output(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw ConfigError(
        fmt::format("--output {}: is a file; name the directory to write the "
                    "Hugging Face model into",
                    dir.string()));
  if (!std::filesystem::is_directory(dir, ec)) return;
  for (const char* name : kModelFiles)
    if (std::filesystem::exists(dir / name, ec))
      throw ConfigError(fmt::format(
          "--output {}: already holds a model ({}): converting into it would mix two models; "
          "name a new directory, or remove that one's files",
          dir.string(), name));
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const char* written :
         {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) {
      if (!name.starts_with(std::string(written) + ".tmp.")) continue;
      std::filesystem::remove(entry.path(), ec);
      spdlog::info("removed {}: the temporary file of a convert that was stopped",
                   entry.path().string());
    }
  }
}

}  // namespace

TfModel read_tf_model(const ConvertOptions& options) {
  TfModel model;
  ConvertResult& result = model.result;
  result.checkpoint = checkpoint_of(options.input);
  const auto beside = std::filesystem::is_directory(options.input)
                          ? options.input
                          : result.checkpoint.parent_path();
  result.bert_config = options.bert_config;
  if (result.bert_config.empty()) {
    for (const char* name : {"bert_config.json", "config.json"})
      if (std::filesystem::exists(beside / name)) {
        result.bert_config = beside / name;
        break;
      }
    if (result.bert_config.empty())
      throw ConfigError(
          fmt::format("{}: no bert_config.json or config.json beside the "
                      "checkpoint: give one with --bert-config",
                      beside.string()));
  }
  result.vocab = options.vocab;
  if (result.vocab.empty() && std::filesystem::exists(beside / "vocab.txt"))
    result.vocab = beside / "vocab.txt";
  result.model = read_hf_config(result.bert_config);
  TfReadReport report;
  TensorMap weights = canonical_bert_weights(read_tf_bert_weights(result.checkpoint, &report));
  result.training_state = std::move(report.training_state);
  result.head = head_of(weights);
  if (result.head.kind == TaskHead::Kind::question_answering &&
      std::erase_if(weights, [](const auto& entry) {
        return entry.first.starts_with(kPoolerPrefix);
      }) > 0)  // Google's run_squad.py keeps the pre-trained pooler; SQuAD never reads it
    spdlog::info(
        "{}: the pooler (bert/pooler/dense) is left out: BertForQuestionAnswering has none",
        result.checkpoint.string());
  check_bert_weights(weights, result.checkpoint, result.model, result.head);
  for (const auto& [name, tensor] : weights)
    for (const float v : tensor.values)
      if (!std::isfinite(v))
        throw ConfigError(fmt::format("{}: tensor {} holds {}: the checkpoint is not usable",
                                      result.checkpoint.string(), name, v));
  result.tensors = weights.size();
  model.weights = std::move(weights);
  return model;
}

ConvertResult convert_tf_to_hf(const ConvertOptions& options) {
  prepare_hf_output(options.output);
  TfModel model = read_tf_model(options);
  const ConvertResult& r = model.result;
  export_hf_directory(options.output, r.model, r.head, model.weights, r.vocab, options.lower_case);
  return model.result;
}

}  // namespace polyhal
