// The table of every config key (polyhal/app/config_keys.hpp): what the reader
// accepts, what `config show` prints and what docs/config-reference.md says.
#include "polyhal/app/config_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "polyhal/app/tokenizer.hpp"

namespace polyhal {
namespace {

using Value = std::function<std::string(const RunConfig&)>;

std::string text(const std::filesystem::path& p) {
  return p.string();
}
std::string text(const std::string& s) {
  return s;
}
std::string text(bool b) {
  return b ? "true" : "false";
}
std::string text(double d) {
  return fmt::format("{}", d);
}
std::string text(std::int64_t i) {
  return std::to_string(i);
}
std::string text(int i) {
  return std::to_string(i);
}
std::string text(std::uint64_t i) {
  return std::to_string(i);
}
std::string text(DType t) {
  return std::string(dtype_name(t));
}

/// A key whose value is one field of RunConfig.
#define POLYHAL_KEY(PATH, FIELD, HELP)                               \
  ConfigKey {                                                        \
    PATH, HELP, [](const RunConfig& c) { return text(c.FIELD); }, {} \
  }
#define POLYHAL_TASK_KEY(PATH, FIELD, HELP, ...)                    \
  ConfigKey {                                                       \
    PATH, HELP, [](const RunConfig& c) { return text(c.FIELD); }, { \
      __VA_ARGS__                                                   \
    }                                                               \
  }
/// A key of the training tasks (pretrain, squad, glue).
#define POLYHAL_TRAINING_KEY(PATH, FIELD, HELP) \
  POLYHAL_TASK_KEY(PATH, FIELD, HELP, "pretrain", "squad", "glue")

std::string dim(const RunConfig& c, const std::string& name) {
  const auto it = c.model.dims.find(name);
  return it == c.model.dims.end() ? "(from preset or hf_config)" : std::to_string(it->second);
}

std::vector<ConfigKey> make_keys() {
  const std::vector<std::string> training{"pretrain", "squad", "glue"};
  const std::vector<std::string> finetuning{"squad", "glue"};
  std::vector<ConfigKey> keys{
      POLYHAL_KEY("backend", backend,
                  "required: the backend plugin to run on (cpu, ipu, gaudi, "
                  "...); --backend overrides it"),
      {"plugin_paths",
       "directories searched for plugins first",
       [](const RunConfig& c) {
         std::vector<std::string> dirs;
         for (const auto& p : c.plugin_paths) dirs.push_back(p.string());
         return fmt::format("[{}]", fmt::join(dirs, ", "));
       },
       {}},
      {"allow_world_writable_plugins",
       "refused: only the command line's --allow-world-writable-plugins may lower the plugin "
       "trust rules",
       [](const RunConfig&) { return std::string("false"); },
       {}},
      {"device",
       "the backend's device options as a mapping; `polyhal devices --backend NAME --options` "
       "lists them",
       [](const RunConfig& c) {
         std::vector<std::string> options;
         for (const auto& [name, value] : c.device) options.push_back(name + ": " + value);
         return fmt::format("{{{}}}", fmt::join(options, ", "));
       },
       {}},
      POLYHAL_KEY("task", task, "required: matmul-bench, inference, pretrain, squad or glue"),
      POLYHAL_TASK_KEY("steps", steps, "optimizer steps to train", "pretrain"),
      POLYHAL_KEY("log.level", log_level, "trace, debug, info, warn, error or off"),
      POLYHAL_KEY("log.file", log_file, "also append log lines to this file"),
      POLYHAL_KEY("log.every", log_every, "a progress line every this many steps"),
      {"matmul_bench.shapes",
       "required: a list of [M, N, K], C[M, N] = A[M, K] x B[K, N]",
       [](const RunConfig& c) {
         std::vector<std::string> shapes;
         for (const auto& s : c.matmul_bench.shapes)
           shapes.push_back(fmt::format("[{}, {}, {}]", s[0], s[1], s[2]));
         return fmt::format("[{}]", fmt::join(shapes, ", "));
       },
       {"matmul-bench"}},
      POLYHAL_TASK_KEY("matmul_bench.dtype", matmul_bench.dtype, "f32, f16 or bf16",
                       "matmul-bench"),
      {"matmul_bench.out_dtype",
       "the output's dtype (default: dtype)",
       [](const RunConfig& c) {
         return text(c.matmul_bench.out_dtype.value_or(c.matmul_bench.dtype));
       },
       {"matmul-bench"}},
      POLYHAL_TASK_KEY("matmul_bench.iterations", matmul_bench.iterations, "measured runs",
                       "matmul-bench"),
      POLYHAL_TASK_KEY("matmul_bench.warmup", matmul_bench.warmup, "unmeasured runs first",
                       "matmul-bench"),
      POLYHAL_KEY("model.preset", model.preset, "tiny, mini, small, medium, base or large"),
      POLYHAL_KEY("model.hf_config", model.hf_config,
                  "a Hugging Face config.json instead of the preset"),
      POLYHAL_KEY("model.weights", model.weights,
                  "safetensors weights (Hugging Face names); default: seeded random init"),
      POLYHAL_KEY("model.save", model.save,
                  "write config.json and model.safetensors here (Hugging Face layout)"),
      POLYHAL_KEY("model.seed", model.seed, "seed of the random init and of dropout"),
      POLYHAL_KEY("model.seq_len", model.seq_len, "tokens per sequence"),
      POLYHAL_KEY("model.precision", model.precision,
                  "f32, bf16 or f16 (activations and GEMMs; master weights stay f32)"),
      POLYHAL_TASK_KEY("model.heads", model.heads, "inference: also run the MLM and NSP heads",
                       "inference"),
      POLYHAL_TASK_KEY("model.head", model.head,
                       "inference: none, pretraining, question_answering or classification",
                       "inference"),
      POLYHAL_TASK_KEY("model.num_labels", model.num_labels, "classification head: labels",
                       "inference"),
      POLYHAL_KEY("model.dropout", model.dropout, "hidden dropout (HF hidden_dropout_prob)"),
      {"model.attention_dropout",
       "attention dropout (default: model.dropout)",
       [](const RunConfig& c) { return text(c.model.attention_dropout.value_or(c.model.dropout)); },
       {}},
      {"model.recompute", "none, all, or a list of layers whose activations backward recomputes",
       [](const RunConfig& c) {
         return c.model.recompute_layers.empty()
                    ? c.model.recompute
                    : fmt::format("[{}]", fmt::join(c.model.recompute_layers, ", "));
       },
       training},
      {"model.pipeline",
       "pipeline stages: a stage count (balanced) or a list of [first, last) layer ranges",
       [](const RunConfig& c) {
         if (c.model.pipeline_stages > 0) return std::to_string(c.model.pipeline_stages);
         std::vector<std::string> stages;
         for (const auto& s : c.model.pipeline)
           stages.push_back(fmt::format("[{}]", fmt::join(s, ", ")));
         return stages.empty() ? std::string("none") : fmt::format("[{}]", fmt::join(stages, ", "));
       },
       training},
      POLYHAL_KEY("batch.micro", batch.micro, "sequences per micro-batch"),
      POLYHAL_TRAINING_KEY("batch.grad_accum", batch.grad_accum,
                           "micro-batches per optimizer step"),
      POLYHAL_KEY("batch.replicas", batch.replicas,
                  "data-parallel replicas (global batch = replicas x grad_accum x micro)"),
      POLYHAL_KEY("collective.engine", collective.engine,
                  "local (replicas as threads) or mpi (one rank per replica, under mpirun); "
                  "`collective: mpi` is short for it"),
      POLYHAL_KEY("collective.timeout_seconds", collective.timeout_seconds,
                  "longest wait in one collective before a rank is declared lost (exit 4)"),
      POLYHAL_KEY("data.source", data.source, "generated, pattern, text or mlperf_hdf5"),
      POLYHAL_KEY("data.text_file", data.text_file,
                  "text: one example a line, a TAB between the two of a pair"),
      POLYHAL_KEY("data.vocab", data.vocab, "a BERT vocab.txt"),
      POLYHAL_KEY("data.lower_case", data.lower_case, "lower-case text before WordPiece"),
      {"data.special_tokens",
       "split (BERT's reference) or keep a literal [MASK] in text",
       [](const RunConfig& c) {
         if (!c.data.special_tokens) return std::string("(split; keep for text inference)");
         return std::string(*c.data.special_tokens == SpecialTokensInText::keep ? "keep" : "split");
       },
       {}},
      POLYHAL_KEY("data.seed", data.seed, "seed of generated data and of the sample order"),
      POLYHAL_TASK_KEY("data.mask_probability", data.mask_probability,
                       "generated pre-training data: share of tokens masked", "pretrain"),
      POLYHAL_TASK_KEY("data.max_predictions", data.max_predictions,
                       "masked positions per sequence at most (the MLM head runs on them)",
                       "pretrain"),
      POLYHAL_TASK_KEY("data.files", data.files, "mlperf_hdf5: a file or a directory of part files",
                       "pretrain"),
      POLYHAL_TASK_KEY("data.shuffle", data.shuffle,
                       "mlperf_hdf5: another sample order every epoch", "pretrain"),
      POLYHAL_TASK_KEY("data.packed", data.packed,
                       "mlperf_hdf5: auto (detect), true or false: packed rows", "pretrain"),
      POLYHAL_TASK_KEY("inference.iterations", inference.iterations, "measured batches",
                       "inference"),
      POLYHAL_TASK_KEY("inference.warmup", inference.warmup, "unmeasured batches first",
                       "inference"),
      {"inference.duration_seconds",
       "instead of iterations: measured batches until this many seconds have passed",
       [](const RunConfig& c) {
         return c.inference.duration_seconds > 0 ? text(c.inference.duration_seconds)
                                                 : std::string("(iterations)");
       },
       {"inference"}},
      POLYHAL_TASK_KEY("inference.output", inference.output,
                       "text inference: JSON lines with each example's outputs", "inference"),
      POLYHAL_TRAINING_KEY("optimizer.name", optimizer.name, "lamb, adamw or sgd"),
      POLYHAL_TRAINING_KEY("optimizer.learning_rate", optimizer.learning_rate,
                           "peak learning rate"),
      POLYHAL_TRAINING_KEY("optimizer.beta1", optimizer.beta1, "Adam/LAMB first moment decay"),
      POLYHAL_TRAINING_KEY("optimizer.beta2", optimizer.beta2, "Adam/LAMB second moment decay"),
      POLYHAL_TRAINING_KEY("optimizer.epsilon", optimizer.epsilon, "Adam/LAMB epsilon"),
      POLYHAL_TRAINING_KEY("optimizer.weight_decay", optimizer.weight_decay,
                           "decoupled weight decay (not on biases and LayerNorm)"),
      POLYHAL_TRAINING_KEY("optimizer.momentum", optimizer.momentum, "sgd momentum"),
      POLYHAL_TRAINING_KEY("optimizer.warmup_steps", optimizer.warmup_steps,
                           "linear warm-up steps"),
      POLYHAL_TRAINING_KEY("optimizer.schedule", optimizer.schedule,
                           "polynomial, exponential, steps or constant"),
      POLYHAL_TRAINING_KEY("optimizer.power", optimizer.power, "polynomial decay power"),
      POLYHAL_TRAINING_KEY("optimizer.end_learning_rate", optimizer.end_learning_rate,
                           "polynomial: the learning rate at the last step"),
      POLYHAL_TRAINING_KEY("optimizer.decay_rate", optimizer.decay_rate,
                           "exponential: lr x decay_rate^(step/decay_steps)"),
      POLYHAL_TRAINING_KEY("optimizer.decay_steps", optimizer.decay_steps,
                           "exponential: see decay_rate"),
      {"optimizer.step_list", "steps schedule: [[from_step, learning_rate], ...]",
       [](const RunConfig& c) {
         std::vector<std::string> steps;
         for (const auto& [from, lr] : c.optimizer.step_list)
           steps.push_back(fmt::format("[{}, {}]", from, lr));
         return fmt::format("[{}]", fmt::join(steps, ", "));
       },
       training},
      POLYHAL_TRAINING_KEY("optimizer.max_grad_norm", optimizer.max_grad_norm,
                           "clip the global gradient norm (0: off)"),
      POLYHAL_TRAINING_KEY("optimizer.loss_scaling", optimizer.loss_scaling,
                           "auto (dynamic for f16), static, dynamic or none"),
      POLYHAL_TRAINING_KEY("optimizer.loss_scale", optimizer.loss_scale,
                           "the static scale, or the dynamic one's start"),
      POLYHAL_TRAINING_KEY("optimizer.loss_scale_growth_interval",
                           optimizer.loss_scale_growth_interval,
                           "dynamic: double the scale after this many good steps"),
      POLYHAL_TRAINING_KEY("optimizer.shard_state", optimizer.shard_state,
                           "shard the optimizer state over the replicas"),
      POLYHAL_TRAINING_KEY("optimizer.first_moment", optimizer.first_moment,
                           "f32 or f16 storage of Adam/LAMB's first moment"),
      POLYHAL_TRAINING_KEY("checkpoint.dir", checkpoint.dir,
                           "write checkpoints here (none when unset)"),
      POLYHAL_TRAINING_KEY("checkpoint.every", checkpoint.every,
                           "a checkpoint every this many steps, and at the end"),
      POLYHAL_TRAINING_KEY("checkpoint.resume", checkpoint.resume,
                           "continue from the newest checkpoint in dir"),
      POLYHAL_TRAINING_KEY("checkpoint.init", checkpoint.init,
                           "start from these weights (phase 2 from phase 1; fine-tuning from a "
                           "pre-trained model)"),
      {"finetune.do", "train, eval and/or predict (default: each whose file is given)",
       [](const RunConfig& c) {
         std::vector<std::string> what;
         if (c.finetune.train) what.push_back("train");
         if (c.finetune.eval) what.push_back("eval");
         if (c.finetune.predict) what.push_back("predict");
         return fmt::format("[{}]", fmt::join(what, ", "));
       },
       finetuning},
      POLYHAL_TASK_KEY("finetune.train_file", finetune.train_file,
                       "SQuAD JSON or GLUE TSV to train on", "squad", "glue"),
      POLYHAL_TASK_KEY("finetune.eval_file", finetune.eval_file,
                       "evaluated after every epoch (EM/F1, accuracy, ...)", "squad", "glue"),
      POLYHAL_TASK_KEY("finetune.predict_file", finetune.predict_file, "predictions written for it",
                       "squad", "glue"),
      POLYHAL_TASK_KEY("finetune.output_dir", finetune.output_dir,
                       "predictions, metrics and the fine-tuned model go here", "squad", "glue"),
      POLYHAL_TASK_KEY("finetune.epochs", finetune.epochs, "passes over the training set", "squad",
                       "glue"),
      POLYHAL_TASK_KEY("finetune.warmup_proportion", finetune.warmup_proportion,
                       "share of the steps warming up (optimizer.warmup_steps wins)", "squad",
                       "glue"),
      POLYHAL_TASK_KEY("finetune.eval_batch", finetune.eval_batch,
                       "rows per evaluation batch (0: batch.micro)", "squad", "glue"),
      POLYHAL_TASK_KEY("finetune.doc_stride", finetune.doc_stride,
                       "tokens between the starts of a long context's windows", "squad"),
      POLYHAL_TASK_KEY("finetune.max_query_length", finetune.max_query_length,
                       "question tokens at most", "squad"),
      POLYHAL_TASK_KEY("finetune.n_best_size", finetune.n_best_size,
                       "start and end candidates considered per feature", "squad"),
      POLYHAL_TASK_KEY("finetune.max_answer_length", finetune.max_answer_length,
                       "answer tokens at most", "squad"),
      POLYHAL_TASK_KEY("finetune.null_score_diff_threshold", finetune.null_score_diff_threshold,
                       "SQuAD v2: predict no answer above this margin", "squad"),
      {"finetune.version_2_with_negative",
       "SQuAD v2 (questions without answers); default: what the file says",
       [](const RunConfig& c) {
         return c.finetune.version_2_with_negative ? text(*c.finetune.version_2_with_negative)
                                                   : std::string("(from the file)");
       },
       {"squad"}},
      POLYHAL_TASK_KEY("finetune.packed", finetune.packed, "pack several features into each row",
                       "squad"),
      POLYHAL_TASK_KEY("finetune.max_sequences_per_pack", finetune.max_sequences_per_pack,
                       "features per packed row at most", "squad"),
      POLYHAL_TASK_KEY("finetune.packing_algorithm", finetune.packing_algorithm, "spfhp or nnlshp",
                       "squad"),
      POLYHAL_TASK_KEY("finetune.glue_task", finetune.glue_task,
                       "cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte or wnli", "glue"),
  };
  for (const char* d : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings", "type_vocab_size"}) {
    const std::string name = d;
    keys.push_back({"model." + name,
                    "a BertConfig dimension over the preset's or hf_config's",
                    [name](const RunConfig& c) { return dim(c, name); },
                    {}});
  }
  return keys;
}

bool applies(const ConfigKey& key, const std::string& task) {
  return key.tasks.empty() || task.empty() ||
         std::find(key.tasks.begin(), key.tasks.end(), task) != key.tasks.end();
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

std::vector<std::string> config_section_keys(std::string_view section) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  const std::string prefix = section.empty() ? "" : std::string(section) + ".";
  for (const auto& key : config_keys()) {
    if (!key.path.starts_with(prefix)) continue;
    const std::string rest = key.path.substr(prefix.size());
    const std::string name = rest.substr(0, rest.find('.'));
    if (seen.insert(name).second) names.push_back(name);
  }
  return names;
}

std::string config_reference_markdown() {
  std::string out =
      "# Config reference\n\n"
      "Generated from the reader's key table (core/src/config/config_keys.cpp) by\n"
      "`polyhal config reference`; a test fails when this file and the table differ.\n"
      "Relative paths are relative to the current directory (docs/config.md, \"Paths\").\n"
      "Device options (`device.*`) belong to each backend: `polyhal devices --backend NAME "
      "--options`.\n\n"
      "| key | default | tasks | what it does |\n|---|---|---|---|\n";
  const RunConfig defaults;
  for (const auto& key : config_keys()) {
    const std::string value = key.value(defaults);
    out += fmt::format(
        "| `{}` | {} | {} | {} |\n", key.path, value.empty() ? "" : "`" + value + "`",
        key.tasks.empty() ? "all" : fmt::format("{}", fmt::join(key.tasks, ", ")), key.help);
  }
  return out;
}

std::string config_show_text(const RunConfig& config,
                             const std::vector<OptionSpec>* device_options) {
  std::string out = fmt::format(
      "# {} (task {}): every key that applies, its value, and where "
      "the value came from\n",
      config.file.string(), config.task);
  std::size_t width = 0;
  for (const auto& key : config_keys()) width = std::max(width, key.path.size());
  for (const auto& key : config_keys()) {
    if (!applies(key, config.task)) continue;
    std::string origin = "default";
    const bool given = config.overrides.contains(key.path) || config.lines.contains(key.path);
    // `collective: mpi` sets collective.engine through its section's shorthand.
    const bool shorthand =
        key.path == "collective.engine" &&
        (config.overrides.contains("collective") || config.lines.contains("collective"));
    if (given || shorthand) origin = config.locate(key.path);
    const std::string value = key.value(config);
    out += fmt::format("{:<{}}  {:<32}  # {}\n", key.path + ":", width + 1,
                       value.empty() ? "(unset)" : value, origin);
  }
  if (device_options) {
    // Every option of the backend, checked as run checks it.
    const DeviceOptions resolved = config.resolve_device(*device_options);
    for (const auto& spec : *device_options) {
      const std::string key = "device." + spec.name;
      const std::string& value = resolved.at(spec.name);
      const std::string origin = config.device.contains(spec.name)
                                     ? config.locate(key)
                                     : fmt::format("default of backend {}", config.backend);
      out += fmt::format("{:<{}}  {:<32}  # {}\n", key + ":", width + 1,
                         value.empty() ? "(unset)" : value, origin);
    }
    return out;
  }
  for (const auto& [name, value] : config.device) {
    out += fmt::format("{:<{}}  {:<32}  # {}\n", "device." + name + ":", width + 1, value,
                       config.locate("device." + name));
  }
  return out;
}

}  // namespace polyhal
