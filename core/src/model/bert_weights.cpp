#include "polyhal/app/bert_weights.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "model/families/model_family.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// BERT's name for a tensor another family's checkpoint names otherwise.
std::string bert_name(std::string name) {
  for (const auto* family : families::model_families())
    if (auto renamed = family->polyhal_name(name)) return std::move(*renamed);
  return name;
}

// Checkpoint tensors that are buffers or tied copies, not parameters.
bool ignorable(const std::string& name) {
  for (const auto* family : families::model_families())
    if (family->ignored_tensor(name)) return true;
  return name.ends_with("embeddings.position_ids") || name == "cls.predictions.decoder.weight" ||
         name == "cls.predictions.decoder.bias";
}

/// Canonical Hugging Face name: BERT's names for another family's
/// ("roberta." for "bert."), "bert." prefix for the encoder, and
/// LayerNorm.weight/bias for the old gamma/beta.
std::string canonical_name(std::string name) {
  name = bert_name(std::move(name));
  if (!name.starts_with("bert.") && !name.starts_with("cls.") && !name.starts_with("qa_outputs.") &&
      !name.starts_with("classifier."))
    name = "bert." + name;
  for (const auto& [old_suffix, new_suffix] : {std::pair{"LayerNorm.gamma", "LayerNorm.weight"},
                                               std::pair{"LayerNorm.beta", "LayerNorm.bias"}}) {
    const std::string from = old_suffix;
    if (name.ends_with(from)) name = name.substr(0, name.size() - from.size()) + new_suffix;
  }
  return name;
}

}  // namespace

bool is_norm_parameter(const std::string& name) {
  return name.find("LayerNorm") != std::string::npos || name.find("norm.") != std::string::npos;
}

std::vector<std::pair<std::string, Shape>> bert_tensor_shapes(const BertConfig& c,
                                                              const TaskHead& head) {
  const std::int64_t h = c.hidden_size, e = c.embedding_width();
  std::vector<std::pair<std::string, Shape>> shapes{
      {"bert.embeddings.word_embeddings.weight", {c.vocab_size, e}},
      {"bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, e}},
      {"bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, e}},
      {"bert.embeddings.LayerNorm.weight", {e}},
      {"bert.embeddings.LayerNorm.bias", {e}},
  };
  if (e != h) {  // ELECTRA-small's projection to the hidden size
    shapes.push_back({"bert.embeddings_project.weight", {h, e}});
    shapes.push_back({"bert.embeddings_project.bias", {h}});
  }
  const auto& family = families::model_family(c.model_type);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l)
    family.layer_tensor_shapes(c, families::encoder_layer_prefix(l), shapes);
  family.final_tensor_shapes(c, shapes);
  const auto pooler = [&] {
    shapes.push_back({"bert.pooler.dense.weight", {h, h}});
    shapes.push_back({"bert.pooler.dense.bias", {h}});
    if (family.pooler_norm()) {  // ModernBertPredictionHead's LayerNorm
      shapes.push_back({"bert.pooler.norm.weight", {h}});
      shapes.push_back({"bert.pooler.norm.bias", {h}});
    }
  };
  switch (head.kind) {
    case TaskHead::Kind::pretraining:
      pooler();
      shapes.insert(shapes.end(), {
                                      {"cls.predictions.transform.dense.weight", {h, h}},
                                      {"cls.predictions.transform.dense.bias", {h}},
                                      {"cls.predictions.transform.LayerNorm.weight", {h}},
                                      {"cls.predictions.transform.LayerNorm.bias", {h}},
                                      {"cls.predictions.bias", {c.vocab_size}},
                                      {"cls.seq_relationship.weight", {2, h}},
                                      {"cls.seq_relationship.bias", {2}},
                                  });
      break;
    case TaskHead::Kind::question_answering:  // BertForQuestionAnswering has no pooler
      if (family.qa_prediction_head()) {      // ModernBERT's: its head on every token
        pooler();
        shapes.push_back({"classifier.weight", {2, h}});
        shapes.push_back({"classifier.bias", {2}});
        break;
      }
      shapes.push_back({"qa_outputs.weight", {2, h}});
      shapes.push_back({"qa_outputs.bias", {2}});
      break;
    case TaskHead::Kind::classification:
      pooler();
      shapes.push_back({"classifier.weight", {head.num_labels, h}});
      shapes.push_back({"classifier.bias", {head.num_labels}});
      break;
  }
  return shapes;
}

TensorMap init_bert_weights(const BertConfig& config, std::uint64_t seed, const TaskHead& head) {
  TensorMap weights;
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const auto& family = families::model_family(config.model_type);
  for (const auto& [name, shape] : bert_tensor_shapes(config, head)) {
    HostTensor t{shape, std::vector<float>(static_cast<std::size_t>(element_count(shape)), 0.0f)};
    if (family.zero_tensor(config, name)) {
      // not in the family's model: stays zero
    } else if (is_norm_parameter(name)) {
      if (name.ends_with(".weight")) std::fill(t.values.begin(), t.values.end(), 1.0f);
    } else if (name.ends_with("convolution.conv.weight")) {
      // Glorot uniform as TensorFlow computes it for Graphcore's [K, C, N].
      const double fans = static_cast<double>(shape[2] * shape[1] + shape[2] * shape[0]);
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      const auto limit = static_cast<float>(std::sqrt(6.0 / fans));
      for (auto& v : t.values) v = limit * uniform(generator);
    } else if (name.ends_with(".weight") || (name.find("feed_forward_") != std::string::npos &&
                                             name.ends_with(".output.bias"))) {
      for (auto& v : t.values) v = normal(generator);
    }
    weights.emplace(name, std::move(t));
  }
  return weights;
}

namespace {

/// The file's tensors under canonical names, without buffers, tied copies
/// and a pre-training checkpoint's optimizer state.
TensorMap read_any_weights(const std::filesystem::path& file) {
  if (!is_tf_checkpoint(file)) return canonical_bert_weights(read_safetensors(file));
  TfReadReport report;
  auto weights = read_tf_bert_weights(file, &report);
  if (!report.training_state.empty())
    spdlog::info("{}: {} tensors of optimizer and training state left out ({}{})", file.string(),
                 report.training_state.size(), report.training_state.front(),
                 report.training_state.size() > 1 ? ", ..." : "");
  if (!report.other.empty())
    spdlog::info("{}: {} tensors that are not numbers left out ({})", file.string(),
                 report.other.size(), report.other.front());
  return canonical_bert_weights(std::move(weights));
}

/// A RoBERTa-family position table as its checkpoint holds it (the
/// pad_token_id + 1 rows no position reads first) cut to the rows polyhal
/// keeps (BertConfig::position_offset). Another shape is left for the
/// shape check to name.
void trim_position_rows(TensorMap& weights, const BertConfig& config) {
  const auto it = weights.find("bert.embeddings.position_embeddings.weight");
  if (config.position_offset == 0 || it == weights.end()) return;
  HostTensor& table = it->second;
  const std::int64_t rows = config.max_position_embeddings + config.position_offset;
  if (table.shape.size() != 2 || table.shape[0] != rows ||
      table.values.size() != static_cast<std::size_t>(rows * table.shape[1]))
    return;
  table.values.erase(table.values.begin(),
                     table.values.begin() + config.position_offset * table.shape[1]);
  table.shape[0] = config.max_position_embeddings;
}

TensorMap read_weights(const std::filesystem::path& file, const BertConfig& config) {
  TensorMap weights = read_any_weights(file);
  trim_position_rows(weights, config);
  // What the family's checkpoints never hold (ModernBERT's absent biases
  // and position table): zeros, in the encoder, and in the head's dense
  // layer where the file has that layer.
  const auto& family = families::model_family(config.model_type);
  const bool has_pooler = weights.contains("bert.pooler.dense.weight");
  for (const auto& [name, shape] :
       bert_tensor_shapes(config, TaskHead{TaskHead::Kind::classification, 1, {}})) {
    const bool encoder = name.starts_with("bert.embeddings.") || name.starts_with("bert.encoder.");
    if (family.zero_tensor(config, name) &&
        (encoder || (has_pooler && name.starts_with("bert.pooler."))))
      weights.try_emplace(
          name, HostTensor{shape, std::vector<float>(static_cast<std::size_t>(element_count(shape)),
                                                     0.0f)});
  }
  // A family without token types (DistilBERT): every token is type 0 of a
  // zero row, which exports fold into the positions (checkpoint_tensors).
  if (!families::model_family(config.model_type).token_types()) {
    const Shape shape{config.type_vocab_size, config.hidden_size};
    weights.try_emplace(
        "bert.embeddings.token_type_embeddings.weight",
        HostTensor{shape,
                   std::vector<float>(static_cast<std::size_t>(element_count(shape)), 0.0f)});
  }
  return weights;
}

[[noreturn]] void throw_problems(const std::filesystem::path& file,
                                 const std::vector<std::string>& problems) {
  std::string message = fmt::format("{}: {} problem{} with the weights:", file.string(),
                                    problems.size(), problems.size() == 1 ? "" : "s");
  const std::size_t shown = std::min<std::size_t>(problems.size(), 10);
  for (std::size_t i = 0; i < shown; ++i) message += "\n  " + problems[i];
  if (problems.size() > shown)
    message += fmt::format("\n  ... and {} more", problems.size() - shown);
  throw ConfigError(message);
}

std::string shape_problem(const std::string& name, const Shape& found, const Shape& needed) {
  return fmt::format("tensor '{}' has shape {}, the model config needs {}", name,
                     shape_string(found), shape_string(needed));
}

/// Every name any BERT head of `config` has (to tell another head's tensors
/// from tensors that are not BERT's at all).
std::set<std::string> known_names(const BertConfig& config) {
  std::set<std::string> names;
  for (const auto kind : {TaskHead::Kind::pretraining, TaskHead::Kind::question_answering,
                          TaskHead::Kind::classification}) {
    for (const auto& [name, shape] : bert_tensor_shapes(config, TaskHead{kind, 1, {}}))
      names.insert(name);
  }
  return names;
}

/// The tensors the head adds on the encoder (pooler, qa_outputs, classifier,
/// cls); ELECTRA-small's embeddings_project is the encoder's.
bool head_tensor(const std::string& name) {
  return !name.starts_with("bert.embeddings.") && !name.starts_with("bert.encoder.") &&
         !name.starts_with("bert.embeddings_project.");
}

/// A position table of the model's width but fewer rows (phase 1's
/// sequence length) gets `fresh`'s rows after its own. Only a table of the
/// model's width is extended: another width is refused by the shape check,
/// never copied into a buffer it overflows.
void extend_rows(HostTensor& table, const HostTensor& fresh, HeadStart& start) {
  if (table.shape.size() != 2 || fresh.shape.size() != 2 || table.shape[1] != fresh.shape[1] ||
      table.shape[0] >= fresh.shape[0] ||
      table.values.size() != static_cast<std::size_t>(table.shape[0] * table.shape[1]))
    return;
  std::vector<float> extended = fresh.values;
  std::copy(table.values.begin(), table.values.end(), extended.begin());
  start.extended = fmt::format("extended position embeddings from {} to {} rows", table.shape[0],
                               fresh.shape[0]);
  table = {fresh.shape, std::move(extended)};
}

}  // namespace

TensorMap canonical_bert_weights(TensorMap raw) {
  TensorMap weights;
  for (auto& [name, tensor] : raw) {
    if (name.starts_with("optimizer.") || ignorable(name) || ignorable(canonical_name(name)))
      continue;
    weights[canonical_name(name)] = std::move(tensor);
  }
  return weights;
}

TensorMap load_bert_weights(const std::filesystem::path& file, const BertConfig& config,
                            const TaskHead& head) {
  TensorMap weights = read_weights(file, config);
  check_bert_weights(weights, file, config, head);
  return weights;
}

TensorMap load_bert_encoder_weights(const std::filesystem::path& file, const BertConfig& config,
                                    std::vector<std::string>* unused, bool* pooler_absent,
                                    TensorMap* head_tensors) {
  TensorMap weights = read_weights(file, config);
  std::vector<std::string> problems;
  TensorMap encoder;
  // Both pooler tensors absent is a model saved without its pooler; one of
  // the two absent is a damaged file and stays an error.
  const bool no_pooler =
      !weights.contains("bert.pooler.dense.weight") && !weights.contains("bert.pooler.dense.bias");
  if (pooler_absent) *pooler_absent = no_pooler;
  for (const auto& [name, shape] : bert_tensor_shapes(config, TaskHead{})) {
    if (head_tensor(name) && !name.starts_with("bert.pooler.")) continue;
    if (no_pooler && name.starts_with("bert.pooler.")) {
      encoder.emplace(
          name, HostTensor{shape, std::vector<float>(static_cast<std::size_t>(element_count(shape)),
                                                     0.0f)});
      continue;
    }
    auto it = weights.find(name);
    if (it == weights.end()) {
      problems.push_back(fmt::format("missing tensor '{}' {}", name, shape_string(shape)));
    } else if (it->second.shape != shape) {
      problems.push_back(shape_problem(name, it->second.shape, shape));
    } else {
      encoder.emplace(name, std::move(it->second));
      weights.erase(it);
    }
  }
  const auto known = known_names(config);
  for (auto& [name, tensor] : weights) {
    if (!known.contains(name)) {
      problems.push_back(fmt::format("unexpected tensor '{}'", name));
      continue;
    }
    if (unused) unused->push_back(name);
    if (head_tensors) (*head_tensors)[name] = std::move(tensor);
  }
  if (!problems.empty()) throw_problems(file, problems);
  return encoder;
}

void check_bert_weights(const TensorMap& weights, const std::filesystem::path& file,
                        const BertConfig& config, const TaskHead& head) {
  std::vector<std::string> problems;
  std::set<std::string> expected;
  for (const auto& [name, shape] : bert_tensor_shapes(config, head)) {
    expected.insert(name);
    auto it = weights.find(name);
    if (it == weights.end()) {
      problems.push_back(fmt::format("missing tensor '{}' {}", name, shape_string(shape)));
    } else if (it->second.shape != shape) {
      problems.push_back(shape_problem(name, it->second.shape, shape));
    }
  }
  for (const auto& [name, tensor] : weights) {
    if (!expected.contains(name)) problems.push_back(fmt::format("unexpected tensor '{}'", name));
  }
  if (!problems.empty()) throw_problems(file, problems);
}

HeadStart load_bert_weights_for_head(const std::filesystem::path& file, const BertConfig& config,
                                     const TaskHead& head, std::uint64_t seed) {
  TensorMap found = read_weights(file, config);
  const TensorMap fresh = init_bert_weights(config, seed, head);
  const std::set<std::string> known = known_names(config);
  HeadStart start;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : bert_tensor_shapes(config, head)) {
    auto it = found.find(name);
    if (it == found.end()) {
      if (!head_tensor(name)) {
        problems.push_back(fmt::format("missing tensor '{}' {}", name, shape_string(shape)));
      } else {
        start.initialised.push_back(name);
        start.weights[name] = fresh.at(name);
      }
      continue;
    }
    if (name == "bert.embeddings.position_embeddings.weight")
      extend_rows(it->second, fresh.at(name), start);
    if (it->second.shape != shape) {
      problems.push_back(
          name.starts_with("classifier.")
              ? fmt::format("tensor '{}' has shape {}, the task needs {}: the file was fine-tuned "
                            "for {} labels; start from its encoder (a pre-training checkpoint "
                            "or its hf/ export) instead",
                            name, shape_string(it->second.shape), shape_string(shape),
                            it->second.shape.empty() ? 0 : it->second.shape[0])
              : shape_problem(name, it->second.shape, shape));
      continue;
    }
    start.weights[name] = std::move(it->second);
    found.erase(it);
  }
  for (const auto& [name, tensor] : found) {
    if (start.weights.contains(name)) continue;
    if (known.contains(name)) {
      start.unused.push_back(name);
    } else {
      problems.push_back(fmt::format("unexpected tensor '{}'", name));
    }
  }
  if (!problems.empty()) throw_problems(file, problems);
  return start;
}

TensorMap checkpoint_tensors(const TensorMap& weights, const BertConfig& config,
                             const TaskHead& head) {
  const auto& family = families::model_family(config.model_type);
  const auto types = weights.find("bert.embeddings.token_type_embeddings.weight");
  TensorMap out;
  for (const auto& [name, tensor] : weights) {
    if (family.zero_tensor(config, name)) continue;  // never in the family's checkpoints
    std::string written = family.checkpoint_name(name, head);
    if (written.empty()) continue;  // not in the family's checkpoints
    HostTensor t = tensor;
    if (name == "bert.embeddings.position_embeddings.weight" && t.shape.size() == 2) {
      const auto width = static_cast<std::size_t>(t.shape[1]);
      // Without token types every token read type 0's row: its positions carry it.
      if (!family.token_types() && types != weights.end() && types->second.values.size() >= width)
        for (std::size_t i = 0; i < t.values.size(); ++i)
          t.values[i] += types->second.values[i % width];
      if (config.position_offset > 0) {  // the rows no position reads, back as zeros
        t.values.insert(t.values.begin(), static_cast<std::size_t>(config.position_offset) * width,
                        0.0f);
        t.shape[0] += config.position_offset;
      }
    }
    out.emplace(std::move(written), std::move(t));
  }
  return out;
}

void save_bert_weights(const TensorMap& weights, DType dtype, const std::filesystem::path& file) {
  write_safetensors(weights, dtype, file);
}

}  // namespace polyhal
