// The model a run computes and the weights it starts from (ModelPlan's
// rule), and the sequence length checked against it.
#include "plan/sequence_fit.hpp"
#include "plan/weights_fit.hpp"

#include <fmt/format.h>

#include "model/families/model_family.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Where the model's dimensions were read: what a user opens to change them.
std::string model_source(const RunConfig& config, const ModelKeys& keys) {
  if (!keys.hf_config.empty()) return keys.hf_config.string();
  if (!config.checkpoint.init.empty())
    return fmt::format("the config of checkpoint.init {}", config.checkpoint.init.string());
  return fmt::format("preset {}", config.model.preset);
}

/// The model file beside checkpoint.init that gives the dimensions, when
/// neither model.preset nor model.hf_config is set: Hugging Face's
/// config.json, else Google's bert_config.json; in the model directory, or
/// beside a TensorFlow checkpoint prefix (a polyhal checkpoint has none).
std::filesystem::path init_model_config(const RunConfig& config, const ModelKeys& keys,
                                        bool directory) {
  const auto& init = config.checkpoint.init;
  if (init.empty() || config.sets("model.preset") || !keys.hf_config.empty()) return {};
  if (!directory && !is_tf_checkpoint(init)) return {};
  const auto dir = directory ? init : init.parent_path();
  for (const char* name : {"config.json", "bert_config.json"})
    if (std::filesystem::exists(dir / name)) return dir / name;
  if (directory)
    config.fail("checkpoint.init",
                fmt::format("{} has no config.json or bert_config.json: set model.preset or "
                            "model.hf_config",
                            init.string()));
  return {};
}

}  // namespace

std::string model_origin(const RunConfig& config, const ModelKeys& keys) {
  std::string out;
  for (const auto& [key, value] : config.model.dims) out += config.locate("model." + key) + ", ";
  return out + model_source(config, keys);
}

void check_sequence_fits(const RunConfig& config, const ModelKeys& keys, const BertConfig& model) {
  const std::int64_t seq = keys.seq_len;
  if (seq > model.max_position_embeddings)
    config.fail("model.seq_len",
                fmt::format("{} tokens, but the model has {} position embeddings "
                            "(max_position_embeddings of {}{})",
                            seq, model.max_position_embeddings, model_source(config, keys),
                            model.position_offset > 0
                                ? fmt::format(", less the {} rows before the first position",
                                              model.position_offset)
                                : ""));
  if (const auto problem = families::model_family(model.model_type)
                               .sequence_problem(model, seq, model_source(config, keys));
      !problem.empty())
    config.fail("model.seq_len", problem);
}

BertConfig resolve_bert_config(const ModelSection& model, const std::string& where) {
  BertConfig c =
      model.hf_config.empty() ? bert_preset(model.preset) : read_hf_config(model.hf_config);
  for (const auto& [key, value] : model.dims) {
    if (key == "vocab_size") c.vocab_size = value;
    if (key == "hidden_size") c.hidden_size = value;
    if (key == "num_hidden_layers") c.num_hidden_layers = value;
    if (key == "num_attention_heads") c.num_attention_heads = value;
    if (key == "intermediate_size") c.intermediate_size = value;
    if (key == "max_position_embeddings") c.max_position_embeddings = value;
    if (key == "type_vocab_size") c.type_vocab_size = value;
  }
  c.validate(where);
  return c;
}

namespace {

/// The start weights: a checkpoint.init directory's model file, the
/// checkpoint.init file or prefix, else model.weights (or model.dir's).
void start_weights(const RunConfig& config, const ModelKeys& keys, bool directory, ModelPlan& m) {
  const auto& init = config.checkpoint.init;
  if (directory) {
    m.model_dir = init;
    m.weights_key = "checkpoint.init";
    try {
      m.weights = model_weights_in(init);
    } catch (const ConfigError& e) {
      config.fail("checkpoint.init", e.what());
    }
  } else if (!init.empty()) {
    if (!std::filesystem::exists(init) && !is_tf_checkpoint(init))
      config.fail("checkpoint.init",
                  fmt::format("no such file or TensorFlow checkpoint ({}.index): {}", init.string(),
                              init.string()));
    m.weights = init;
    m.weights_key = "checkpoint.init";
  } else {
    m.weights = keys.weights;
    m.weights_key = keys.weights_key;
  }
}

/// The model's own config.json head, and a sequence classifier's labels:
/// from the start model's config.json even when the config gives the
/// dimensions (model.preset).
void model_head(const RunConfig& config, ModelPlan& m) {
  const auto file = !m.model_dir.empty() && std::filesystem::exists(m.model_dir / "config.json")
                        ? m.model_dir / "config.json"
                        : m.config_file;
  if (file.empty()) return;
  try {
    m.file_head = read_hf_head(file);
  } catch (const ConfigError& e) {
    config.fail(config.checkpoint.init.empty()
                    ? config.model.dir.empty() ? "model.hf_config" : "model.dir"
                    : "checkpoint.init",
                e.what());
  }
  if (m.file_head && m.file_head->kind == TaskHead::Kind::classification)
    m.start_labels = m.file_head->labels;
}

/// The keys the card carries as the run uses them.
void take_keys(const ModelKeys& keys, ModelPlan& m) {
  m.model_weights = keys.weights;
  m.vocab = keys.vocab;
  m.vocab_source = keys.vocab_source;
  m.seq_len = keys.seq_len;
  m.seq_len_source = keys.seq_len_source;
  m.head = keys.head;
  m.heads = keys.heads;
  m.num_labels = keys.num_labels;
  m.head_source = keys.head_source;
  if (m.model_dir.empty()) m.model_dir = keys.dir;
}

/// The head the task computes (pre-training's, and inference's with
/// model.head pretraining; the fine-tuning task's; else the model file's)
/// is one the family has.
void check_family_runs_task(const RunConfig& config, const ModelPlan& m) {
  using Kind = TaskHead::Kind;
  std::optional<Kind> kind;
  if (config.task == "pretrain" || m.heads) kind = Kind::pretraining;
  if (config.task == "glue") kind = Kind::classification;
  if (config.task == "squad") kind = Kind::question_answering;
  if (!kind && m.file_head) kind = m.file_head->kind;
  if (!kind) return;
  if (const auto problem =
          families::model_family(m.dims.model_type).task_problem(*kind, config.task != "inference");
      !problem.empty())
    config.fail(config.task == "inference" ? "model.head" : "task", problem);
}

}  // namespace

ModelPlan resolve_model(const RunConfig& config, bool plan_only) {
  const ModelKeys keys = resolve_model_keys(config);
  ModelPlan m;
  const auto& init = config.checkpoint.init;
  const bool preset_only = keys.hf_config.empty() && config.model.dims.empty();
  m.name = preset_only ? config.model.preset : "custom";
  m.origin = model_origin(config, keys);
  ModelSection model = config.model;
  model.hf_config = keys.hf_config;
  m.config_file = keys.hf_config;
  if (plan_only && !init.empty() && !std::filesystem::exists(init) && !is_tf_checkpoint(init) &&
      (config.sets("model.preset") || !keys.hf_config.empty())) {
    // A plan before the run that writes checkpoint.init: the dimensions alone.
    take_keys(keys, m);
    m.dims = resolve_bert_config(model, m.origin);
    check_sequence_fits(config, keys, m.dims);
    m.tokenizer = {m.vocab, resolve_tokenizer_options(config, m.vocab), m.dims.vocab_size};
    return m;
  }
  const bool directory = !init.empty() && std::filesystem::is_directory(init);
  start_weights(config, keys, directory, m);
  if (const auto file = init_model_config(config, keys, directory); !file.empty()) {
    model.hf_config = m.config_file = file;
    m.name = "custom";
  }
  take_keys(keys, m);
  m.dims = resolve_bert_config(model, m.origin);
  check_sequence_fits(config, keys, m.dims);
  check_weights_fit(config, m);
  // The directory's tokenizer: its tokenizer.json, else its vocab.txt
  // (plan/model_keys.cpp's rule).
  if (m.vocab.empty() && !m.model_dir.empty()) {
    for (const char* file :
         {"tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model"}) {
      if (std::filesystem::exists(m.model_dir / file)) {
        m.vocab = m.model_dir / file;
        m.vocab_source = m.weights_key + " " + m.model_dir.string();
        break;
      }
    }
  }
  m.tokenizer = {m.vocab, resolve_tokenizer_options(config, m.vocab), m.dims.vocab_size};
  model_head(config, m);
  check_family_runs_task(config, m);
  return m;
}

}  // namespace polyhal
