#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <tuple>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/glue_tasks.hpp"
#include "polyhal/app/suggest.hpp"
#include "polyhal/error.hpp"
#include "util/format.hpp"

namespace polyhal {
namespace {

/// Any integer key: far below where products of a few of them overflow int64.
constexpr std::int64_t kMaxConfigInteger = std::int64_t{1} << 40;
/// Repetitions (iterations, warm-up): an int, and hours at a millisecond each.
constexpr std::int64_t kMaxRepeats = 1'000'000'000;
/// A collective's timeout: about 11 days; a steady_clock deadline from it never overflows.
constexpr double kMaxTimeoutSeconds = 1e6;
/// A config file: bytes read, mapping depth and keys walked.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxConfigDepth = 16;
constexpr std::int64_t kMaxConfigKeys = 10000;

/// Walks a YAML tree, reading values and remembering where each key was, so
/// every error can name file, line and key.
class ConfigReader {
 public:
  ConfigReader(RunConfig& config, std::string file_label)
      : config_(config), file_label_(std::move(file_label)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw ConfigError(fmt::format("{}: key '{}': {}", config_.locate(key), key, problem));
  }

  /// Records each key's line, and refuses a key given twice in one mapping
  /// (yaml-cpp would silently keep one of them). Aliases share their
  /// anchor's nodes, so nested aliases would make this walk exponential: the
  /// walk is bounded in depth and in keys visited.
  void remember_lines(const YAML::Node& node, const std::string& prefix, int depth = 0) {
    if (!node.IsMap()) return;
    if (depth > kMaxConfigDepth)
      throw ConfigError(fmt::format("{}: key '{}': nested deeper than {} levels",
                                    config_.file.string(), prefix, kMaxConfigDepth));
    std::map<std::string, int> seen;
    for (const auto& entry : node) {
      if (++visited_ > kMaxConfigKeys)
        throw ConfigError(
            fmt::format("{}: more than {} keys (aliases expanding?): a config is a few dozen keys",
                        config_.file.string(), kMaxConfigKeys));
      const std::string key =
          prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
      const int line = entry.first.Mark().line + 1;
      if (auto [it, fresh] = seen.emplace(key, line); !fresh) {
        throw ConfigError(fmt::format("{}:{}: key '{}': given twice (first at line {})",
                                      config_.file.string(), line, key, it->second));
      }
      if (entry.first.Mark().line >= 0) config_.lines[key] = line;
      remember_lines(entry.second, key, depth + 1);
    }
  }

  /// Every key of `node` must be in `allowed`.
  void require_known_keys(const YAML::Node& node, const std::string& prefix,
                          const std::vector<std::string>& allowed) const {
    if (!node.IsMap()) fail(prefix, "expected a mapping of keys to values");
    for (const auto& entry : node) {
      const std::string name = entry.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      const std::string key = prefix.empty() ? name : prefix + "." + name;
      const auto suggestion = nearest_word(name, allowed);
      fail(key, !suggestion
                    ? "unknown key"
                    : fmt::format("unknown key (did you mean '{}'?)",
                                  prefix.empty() ? *suggestion : prefix + "." + *suggestion));
    }
  }

  std::string scalar(const YAML::Node& node, const std::string& key) const {
    if (node.IsNull()) fail(key, "expected a value, got nothing");
    if (!node.IsScalar()) fail(key, "expected a single value, got a list or mapping");
    return node.Scalar();
  }

  /// An integer in [min, max]; `max` keeps counts and sizes far from
  /// overflow in what is computed from them.
  std::int64_t integer(const YAML::Node& node, const std::string& key, std::int64_t min,
                       std::int64_t max = kMaxConfigInteger) const {
    const std::string text = scalar(node, key);
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      fail(key, fmt::format("expected {}, got \"{}\"",
                            min == 1 ? "a positive integer" : "an integer", text));
    }
    if (value < min) fail(key, fmt::format("expected an integer >= {}, got {}", min, value));
    if (value > max) fail(key, fmt::format("expected an integer <= {}, got {}", max, value));
    return value;
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    const std::string text = scalar(node, key);
    if (text == "true") return true;
    if (text == "false") return false;
    fail(key, fmt::format("expected true or false, got \"{}\"", text));
  }

  double number(const YAML::Node& node, const std::string& key) const {
    const std::string text = scalar(node, key);
    try {
      std::size_t used = 0;
      const double value = std::stod(text, &used);
      if (used == text.size() && std::isfinite(value)) return value;
    } catch (const std::exception&) {
    }
    fail(key, fmt::format("expected a number, got \"{}\"", text));
  }

  DType dtype(const YAML::Node& node, const std::string& key) const {
    const std::string text = scalar(node, key);
    auto type = parse_dtype(text);
    if (!type) fail(key, fmt::format("expected one of f32, f16, bf16, got \"{}\"", text));
    return *type;
  }

 private:
  RunConfig& config_;
  std::string file_label_;
  std::int64_t visited_ = 0;  // keys remember_lines walked
};

/// Merges `patch` into `target`, recursing into mappings present in both.
void merge_into(YAML::Node target, const YAML::Node& patch) {
  for (const auto& entry : patch) {
    const std::string key = entry.first.Scalar();
    if (entry.second.IsMap() && target[key] && target[key].IsMap()) {
      merge_into(target[key], entry.second);
    } else {
      target[key] = entry.second;
    }
  }
}

void apply_override(YAML::Node& root, const std::string& text, RunConfig& config) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format("--set {}: expected key.path=value", text));
  }
  const std::string path = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception&) {
    value = YAML::Node(value_text);
  }
  if (value.IsNull() && !value_text.empty() && value_text != "null" && value_text != "~") {
    value = YAML::Node(value_text);
  }
  // Build {a: {b: value}} and merge it in.
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node patch = value;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->empty()) throw ConfigError(fmt::format("--set {}: empty key in '{}'", text, path));
    YAML::Node level(YAML::NodeType::Map);
    level[*it] = patch;
    patch = level;
  }
  merge_into(root, patch);
  config.overrides[path] = "--set " + text;
}

void read_matmul_bench(const YAML::Node& node, ConfigReader& reader, MatmulBenchConfig& out) {
  reader.require_known_keys(node, "matmul_bench", config_section_keys("matmul_bench"));
  if (!node["shapes"]) reader.fail("matmul_bench.shapes", "required: a list of [M, N, K]");
  const YAML::Node shapes = node["shapes"];
  if (!shapes.IsSequence() || shapes.size() == 0) {
    reader.fail("matmul_bench.shapes", "expected a non-empty list of [M, N, K]");
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::string key = fmt::format("matmul_bench.shapes[{}]", i);
    if (!shapes[i].IsSequence() || shapes[i].size() != 3) reader.fail(key, "expected [M, N, K]");
    std::array<std::int64_t, 3> mnk{};
    for (std::size_t d = 0; d < 3; ++d)
      mnk[d] = reader.integer(shapes[i][d], "matmul_bench.shapes", 1);
    out.shapes.push_back(mnk);
  }
  if (node["dtype"]) out.dtype = reader.dtype(node["dtype"], "matmul_bench.dtype");
  if (node["out_dtype"]) out.out_dtype = reader.dtype(node["out_dtype"], "matmul_bench.out_dtype");
  if (node["iterations"]) {
    out.iterations = static_cast<int>(
        reader.integer(node["iterations"], "matmul_bench.iterations", 1, kMaxRepeats));
  }
  if (node["warmup"])
    out.warmup =
        static_cast<int>(reader.integer(node["warmup"], "matmul_bench.warmup", 0, kMaxRepeats));
}

/// The one rule for paths (docs/config.md): a relative path, in a config
/// file, a --set value or on the command line, is relative to the current
/// directory, so an installed config in /usr/share reads and writes where
/// the user runs it. Made absolute here, so messages name the real place.
std::filesystem::path from_current_directory(const std::string& path) {
  return std::filesystem::absolute(std::filesystem::path(path)).lexically_normal();
}

void read_model(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  static const std::vector<std::string> dims{"vocab_size",        "hidden_size",
                                             "num_hidden_layers", "num_attention_heads",
                                             "intermediate_size", "max_position_embeddings",
                                             "type_vocab_size"};
  reader.require_known_keys(node, "model", config_section_keys("model"));
  auto& m = config.model;
  if (node["preset"]) {
    m.preset = reader.scalar(node["preset"], "model.preset");
    const auto& names = bert_preset_names();
    if (std::find(names.begin(), names.end(), m.preset) == names.end()) {
      reader.fail("model.preset", fmt::format("unknown preset \"{}\"; presets: {}", m.preset,
                                              fmt::join(names, ", ")));
    }
  }
  if (node["hf_config"])
    m.hf_config = from_current_directory(reader.scalar(node["hf_config"], "model.hf_config"));
  if (node["weights"])
    m.weights = from_current_directory(reader.scalar(node["weights"], "model.weights"));
  if (node["save"]) m.save = from_current_directory(reader.scalar(node["save"], "model.save"));
  if (node["seed"])
    m.seed = static_cast<std::uint64_t>(reader.integer(node["seed"], "model.seed", 0));
  if (node["heads"]) m.heads = reader.boolean(node["heads"], "model.heads");
  if (node["head"]) {
    if (node["heads"]) reader.fail("model.head", "give model.head or model.heads, not both");
    m.head = reader.scalar(node["head"], "model.head");
    if (m.head != "none" && m.head != "pretraining" && m.head != "question_answering" &&
        m.head != "classification") {
      reader.fail("model.head",
                  fmt::format("expected none, pretraining, question_answering or classification, "
                              "got \"{}\"",
                              m.head));
    }
    m.heads = m.head == "pretraining";
  }
  if (node["num_labels"]) m.num_labels = reader.integer(node["num_labels"], "model.num_labels", 1);
  if (const YAML::Node pipeline = node["pipeline"]) {
    if (pipeline.IsSequence()) {
      for (const auto& stage : pipeline) {
        if (!stage.IsSequence() || stage.size() == 0)
          reader.fail("model.pipeline", "expected a list of stages, each a list of layer numbers");
        std::vector<std::int64_t> layers;
        for (const auto& layer : stage)
          layers.push_back(reader.integer(layer, "model.pipeline", 0));
        m.pipeline.push_back(std::move(layers));
      }
      if (m.pipeline.empty()) reader.fail("model.pipeline", "an empty list of stages");
    } else {
      m.pipeline_stages = reader.integer(pipeline, "model.pipeline", 1);
    }
  }
  if (const YAML::Node recompute = node["recompute"]) {
    if (recompute.IsSequence()) {
      m.recompute = "layers";
      for (const auto& layer : recompute)
        m.recompute_layers.push_back(reader.integer(layer, "model.recompute", 0));
      if (m.recompute_layers.empty())
        reader.fail("model.recompute", "an empty list: use none, all or layer numbers");
    } else {
      m.recompute = reader.scalar(recompute, "model.recompute");
      if (m.recompute != "none" && m.recompute != "all")
        reader.fail(
            "model.recompute",
            fmt::format("expected none, all or a list of layer numbers, got \"{}\"", m.recompute));
    }
  }
  if (node["dropout"]) {
    m.dropout = reader.number(node["dropout"], "model.dropout");
    if (m.dropout < 0.0 || m.dropout >= 1.0)
      reader.fail("model.dropout", "expected a value in [0, 1)");
  }
  if (node["attention_dropout"]) {
    m.attention_dropout = reader.number(node["attention_dropout"], "model.attention_dropout");
    if (*m.attention_dropout < 0.0 || *m.attention_dropout >= 1.0)
      reader.fail("model.attention_dropout", "expected a value in [0, 1)");
  }
  if (node["seq_len"]) m.seq_len = reader.integer(node["seq_len"], "model.seq_len", 1);
  if (node["precision"]) m.precision = reader.dtype(node["precision"], "model.precision");
  for (const auto& d : dims) {
    if (node[d]) m.dims[d] = reader.integer(node[d], "model." + d, 1);
  }
}

void read_batch(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  reader.require_known_keys(node, "batch", config_section_keys("batch"));
  if (node["micro"]) config.batch.micro = reader.integer(node["micro"], "batch.micro", 1);
  if (node["grad_accum"])
    config.batch.grad_accum = reader.integer(node["grad_accum"], "batch.grad_accum", 1);
  if (node["replicas"])
    config.batch.replicas = reader.integer(node["replicas"], "batch.replicas", 1);
}

/// `collective: local|mpi`, or a mapping {engine, timeout_seconds}.
void read_collective(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  auto& c = config.collective;
  if (node.IsScalar()) {
    c.engine = reader.scalar(node, "collective");
  } else {
    reader.require_known_keys(node, "collective", config_section_keys("collective"));
    if (node["engine"]) c.engine = reader.scalar(node["engine"], "collective.engine");
    if (node["timeout_seconds"]) {
      c.timeout_seconds = reader.number(node["timeout_seconds"], "collective.timeout_seconds");
      if (!(c.timeout_seconds > 0) || c.timeout_seconds > kMaxTimeoutSeconds)
        reader.fail("collective.timeout_seconds",
                    fmt::format("expected a positive number of seconds up to {:g}, got {}",
                                kMaxTimeoutSeconds, c.timeout_seconds));
    }
  }
  if (c.engine != "local" && c.engine != "mpi") {
    reader.fail(node.IsScalar() ? "collective" : "collective.engine",
                fmt::format("expected local or mpi, got \"{}\"", c.engine));
  }
}

void read_optimizer(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  reader.require_known_keys(node, "optimizer", config_section_keys("optimizer"));
  auto& o = config.optimizer;
  if (node["first_moment"]) {
    const std::string type = reader.scalar(node["first_moment"], "optimizer.first_moment");
    if (type != "f32" && type != "f16") {
      reader.fail(
          "optimizer.first_moment",
          fmt::format("expected f32 or f16 (the second moment is always f32), got \"{}\"", type));
    }
    o.first_moment = type == "f16" ? DType::f16 : DType::f32;
  }
  if (node["shard_state"])
    o.shard_state = reader.boolean(node["shard_state"], "optimizer.shard_state");
  if (node["name"]) {
    o.name = reader.scalar(node["name"], "optimizer.name");
    if (o.name != "lamb" && o.name != "adamw" && o.name != "sgd") {
      reader.fail("optimizer.name", fmt::format("expected lamb, adamw or sgd, got \"{}\"", o.name));
    }
  }
  for (auto [key, field] :
       {std::pair{"learning_rate", &o.learning_rate}, std::pair{"beta1", &o.beta1},
        std::pair{"beta2", &o.beta2}, std::pair{"epsilon", &o.epsilon},
        std::pair{"weight_decay", &o.weight_decay}, std::pair{"momentum", &o.momentum},
        std::pair{"power", &o.power}, std::pair{"end_learning_rate", &o.end_learning_rate},
        std::pair{"decay_rate", &o.decay_rate}, std::pair{"max_grad_norm", &o.max_grad_norm},
        std::pair{"loss_scale", &o.loss_scale}}) {
    if (node[key]) *field = reader.number(node[key], std::string("optimizer.") + key);
  }
  if (node["warmup_steps"])
    o.warmup_steps = reader.integer(node["warmup_steps"], "optimizer.warmup_steps", 0);
  if (node["loss_scaling"]) {
    o.loss_scaling = reader.scalar(node["loss_scaling"], "optimizer.loss_scaling");
    if (o.loss_scaling != "auto" && o.loss_scaling != "none" && o.loss_scaling != "static" &&
        o.loss_scaling != "dynamic") {
      reader.fail(
          "optimizer.loss_scaling",
          fmt::format("expected auto, none, static or dynamic, got \"{}\"", o.loss_scaling));
    }
  }
  if (node["loss_scale_growth_interval"]) {
    o.loss_scale_growth_interval = reader.integer(node["loss_scale_growth_interval"],
                                                  "optimizer.loss_scale_growth_interval", 1);
  }
  if (node["decay_steps"])
    o.decay_steps = reader.integer(node["decay_steps"], "optimizer.decay_steps", 1);
  if (node["schedule"]) {
    o.schedule = reader.scalar(node["schedule"], "optimizer.schedule");
    if (o.schedule != "polynomial" && o.schedule != "exponential" && o.schedule != "steps" &&
        o.schedule != "constant") {
      reader.fail("optimizer.schedule",
                  fmt::format("expected polynomial, exponential, steps or constant, got \"{}\"",
                              o.schedule));
    }
  }
  if (node["step_list"]) {
    const YAML::Node list = node["step_list"];
    if (!list.IsSequence())
      reader.fail("optimizer.step_list", "expected a list of [from_step, learning_rate]");
    for (const auto& entry : list) {
      if (!entry.IsSequence() || entry.size() != 2) {
        reader.fail("optimizer.step_list", "expected a list of [from_step, learning_rate]");
      }
      o.step_list.emplace_back(reader.integer(entry[0], "optimizer.step_list", 0),
                               reader.number(entry[1], "optimizer.step_list"));
    }
  }
  if (o.schedule == "steps" && o.step_list.empty()) {
    reader.fail("optimizer.step_list", "required by schedule: steps");
  }
}

void read_inference(const YAML::Node& inference, ConfigReader& reader, RunConfig& config) {
  reader.require_known_keys(inference, "inference", config_section_keys("inference"));
  if (inference["duration_seconds"]) {
    const double seconds =
        reader.number(inference["duration_seconds"], "inference.duration_seconds");
    if (!(seconds > 0) || seconds > kMaxTimeoutSeconds)
      reader.fail("inference.duration_seconds",
                  fmt::format("expected a positive number of seconds up to {:g}, got {}",
                              kMaxTimeoutSeconds, seconds));
    config.inference.duration_seconds = seconds;
  }
  if (inference["iterations"]) {
    config.inference.iterations = static_cast<int>(
        reader.integer(inference["iterations"], "inference.iterations", 1, kMaxRepeats));
  }
  if (inference["warmup"]) {
    config.inference.warmup =
        static_cast<int>(reader.integer(inference["warmup"], "inference.warmup", 0, kMaxRepeats));
  }
  if (inference["output"])
    config.inference.output =
        from_current_directory(reader.scalar(inference["output"], "inference.output"));
}

void read_checkpoint(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  reader.require_known_keys(node, "checkpoint", config_section_keys("checkpoint"));
  auto& c = config.checkpoint;
  if (node["dir"]) c.dir = from_current_directory(reader.scalar(node["dir"], "checkpoint.dir"));
  if (node["every"]) c.every = reader.integer(node["every"], "checkpoint.every", 1);
  if (node["resume"]) c.resume = reader.boolean(node["resume"], "checkpoint.resume");
  if (node["init"]) c.init = from_current_directory(reader.scalar(node["init"], "checkpoint.init"));
}

void read_data(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  reader.require_known_keys(node, "data", config_section_keys("data"));
  auto& d = config.data;
  if (node["source"]) {
    d.source = reader.scalar(node["source"], "data.source");
    if (d.source != "generated" && d.source != "text" && d.source != "pattern" &&
        d.source != "mlperf_hdf5") {
      reader.fail("data.source", fmt::format("expected generated, pattern, mlperf_hdf5 or text, "
                                             "got \"{}\"",
                                             d.source));
    }
  }
  if (node["text_file"])
    d.text_file = from_current_directory(reader.scalar(node["text_file"], "data.text_file"));
  if (node["vocab"]) d.vocab = from_current_directory(reader.scalar(node["vocab"], "data.vocab"));
  if (node["lower_case"]) d.lower_case = reader.boolean(node["lower_case"], "data.lower_case");
  if (node["special_tokens"]) {
    const std::string how = reader.scalar(node["special_tokens"], "data.special_tokens");
    if (how != "split" && how != "keep")
      reader.fail(
          "data.special_tokens",
          fmt::format("expected split (BERT's reference) or keep (Hugging Face), got \"{}\"", how));
    d.special_tokens = how == "keep" ? SpecialTokensInText::keep : SpecialTokensInText::split;
  }
  if (node["seed"])
    d.seed = static_cast<std::uint64_t>(reader.integer(node["seed"], "data.seed", 0));
  if (node["mask_probability"]) {
    d.mask_probability = reader.number(node["mask_probability"], "data.mask_probability");
    if (!(d.mask_probability > 0.0 && d.mask_probability < 1.0)) {
      reader.fail("data.mask_probability", "expected a value between 0 and 1");
    }
  }
  if (node["max_predictions"]) {
    d.max_predictions = reader.integer(node["max_predictions"], "data.max_predictions", 1);
  }
  if (node["files"]) d.files = from_current_directory(reader.scalar(node["files"], "data.files"));
  if (node["shuffle"]) d.shuffle = reader.boolean(node["shuffle"], "data.shuffle");
  if (node["packed"]) {
    d.packed = reader.scalar(node["packed"], "data.packed");
    if (d.packed != "auto" && d.packed != "true" && d.packed != "false")
      reader.fail("data.packed", fmt::format("expected auto, true or false, got \"{}\"", d.packed));
  }
  if (d.source == "mlperf_hdf5" && d.files.empty()) {
    reader.fail("data.files",
                "required when data.source is mlperf_hdf5 (an .hdf5 file or a directory of them)");
  }
  if (d.source == "text") {
    if (d.text_file.empty()) reader.fail("data.text_file", "required when data.source is text");
    if (d.vocab.empty())
      reader.fail("data.vocab", "required when data.source is text (a BERT vocab.txt)");
  }
}

/// `finetune`: shared keys, then the keys of the task that reads it.
void read_finetune(const YAML::Node& node, ConfigReader& reader, RunConfig& config) {
  const bool squad = config.task == "squad";
  // Shared keys, then the task's own (config_keys.cpp says which task a key is for).
  std::vector<std::string> keys, squad_keys;
  for (const auto& key : config_keys()) {
    if (!key.path.starts_with("finetune.")) continue;
    const std::string name = key.path.substr(9);
    const bool squad_only = key.tasks == std::vector<std::string>{"squad"};
    const bool glue_only = key.tasks == std::vector<std::string>{"glue"};
    if (squad_only) squad_keys.push_back(name);
    if ((!squad_only && !glue_only) || (squad_only && squad) || (glue_only && !squad))
      keys.push_back(name);
  }
  // A key of the other task names that task instead of "unknown key".
  for (const auto& entry : node) {
    const std::string name = entry.first.Scalar();
    const bool squad_only =
        std::find(squad_keys.begin(), squad_keys.end(), name) != squad_keys.end();
    if ((squad_only && !squad) || (name == "glue_task" && squad))
      reader.fail("finetune." + name, fmt::format("used by task {} only, not {}",
                                                  squad_only ? "squad" : "glue", config.task));
  }
  reader.require_known_keys(node, "finetune", keys);
  auto& f = config.finetune;
  const auto path = [&](const char* key) {
    return from_current_directory(reader.scalar(node[key], std::string("finetune.") + key));
  };
  if (node["train_file"]) f.train_file = path("train_file");
  if (node["eval_file"]) f.eval_file = path("eval_file");
  if (node["predict_file"]) f.predict_file = path("predict_file");
  if (node["output_dir"]) f.output_dir = path("output_dir");
  f.train = !f.train_file.empty();
  f.eval = !f.eval_file.empty();
  f.predict = !f.predict_file.empty();
  if (node["do"]) {
    const YAML::Node list = node["do"];
    f.train = f.eval = f.predict = false;
    const auto take = [&](const YAML::Node& item) {
      const std::string what = reader.scalar(item, "finetune.do");
      if (what == "train")
        f.train = true;
      else if (what == "eval")
        f.eval = true;
      else if (what == "predict")
        f.predict = true;
      else
        reader.fail("finetune.do",
                    fmt::format("expected train, eval or predict, got \"{}\"", what));
    };
    if (list.IsSequence()) {
      for (const auto& item : list) take(item);
    } else {
      take(list);
    }
    if (!f.train && !f.eval && !f.predict)
      reader.fail("finetune.do", "nothing to do: list train, eval and/or predict");
  }
  for (const auto& [wanted, file, key] : {std::tuple{f.train, f.train_file, "train_file"},
                                          std::tuple{f.eval, f.eval_file, "eval_file"},
                                          std::tuple{f.predict, f.predict_file, "predict_file"}}) {
    if (wanted && file.empty())
      reader.fail(std::string("finetune.") + key,
                  fmt::format("required by finetune.do: {}",
                              std::string(key).substr(0, std::string(key).find('_'))));
  }
  if (!f.train && !f.eval && !f.predict)
    reader.fail("finetune", "nothing to do: give train_file, eval_file and/or predict_file");
  if (node["epochs"]) f.epochs = reader.integer(node["epochs"], "finetune.epochs", 1);
  if (node["warmup_proportion"]) {
    f.warmup_proportion = reader.number(node["warmup_proportion"], "finetune.warmup_proportion");
    if (f.warmup_proportion < 0.0 || f.warmup_proportion > 1.0)
      reader.fail("finetune.warmup_proportion", "expected a share in [0, 1]");
  }
  if (node["eval_batch"])
    f.eval_batch = reader.integer(node["eval_batch"], "finetune.eval_batch", 1);
  for (auto [key, field] :
       {std::pair{"doc_stride", &f.doc_stride}, std::pair{"max_query_length", &f.max_query_length},
        std::pair{"n_best_size", &f.n_best_size},
        std::pair{"max_answer_length", &f.max_answer_length}}) {
    if (node[key]) *field = reader.integer(node[key], std::string("finetune.") + key, 1);
  }
  if (node["null_score_diff_threshold"])
    f.null_score_diff_threshold =
        reader.number(node["null_score_diff_threshold"], "finetune.null_score_diff_threshold");
  if (node["version_2_with_negative"])
    f.version_2_with_negative =
        reader.boolean(node["version_2_with_negative"], "finetune.version_2_with_negative");
  if (node["packed"]) f.packed = reader.boolean(node["packed"], "finetune.packed");
  if (node["max_sequences_per_pack"]) {
    f.max_sequences_per_pack =
        reader.integer(node["max_sequences_per_pack"], "finetune.max_sequences_per_pack", 1);
    if (f.max_sequences_per_pack > kMaxSequencesPerPack)
      reader.fail("finetune.max_sequences_per_pack",
                  fmt::format("at most {} sequences share a row", kMaxSequencesPerPack));
  }
  if (node["packing_algorithm"]) {
    f.packing_algorithm = reader.scalar(node["packing_algorithm"], "finetune.packing_algorithm");
    if (f.packing_algorithm != "spfhp" && f.packing_algorithm != "nnlshp")
      reader.fail("finetune.packing_algorithm",
                  fmt::format("expected spfhp or nnlshp, got \"{}\"", f.packing_algorithm));
  }
  if (node["glue_task"]) {
    f.glue_task = reader.scalar(node["glue_task"], "finetune.glue_task");
    try {
      glue_task(f.glue_task);
    } catch (const ConfigError& e) {
      reader.fail("finetune.glue_task", e.what());
    }
  }
  if (!squad && f.glue_task.empty())
    reader.fail("finetune.glue_task",
                "required by task glue (cola, sst-2, mrpc, sts-b, qqp, mnli, "
                "mnli-mm, qnli, rte or wnli)");
}

}  // namespace

std::string RunConfig::locate(const std::string& key_path) const {
  for (std::string prefix = key_path;;) {
    if (auto it = overrides.find(prefix); it != overrides.end()) return it->second;
    const auto dot = prefix.rfind('.');
    if (dot == std::string::npos) break;
    prefix = prefix.substr(0, dot);
  }
  // A section only a --set made (--set checkpoint.dir=x on a config without
  // 'checkpoint') came from that --set, not from the file.
  if (!lines.contains(key_path)) {
    for (const auto& [key, origin] : overrides) {
      if (key.starts_with(key_path + ".")) return origin;
    }
  }
  for (std::string prefix = key_path;;) {
    if (auto it = lines.find(prefix); it != lines.end())
      return fmt::format("{}:{}", file.string(), it->second);
    const auto cut = prefix.find_last_of(".[");
    if (cut == std::string::npos) break;
    prefix = prefix.substr(0, cut);
  }
  return file.string();
}

DeviceOptions RunConfig::resolve_device(const std::vector<OptionSpec>& specs) const {
  DeviceOptions resolved;
  for (const auto& spec : specs) resolved[spec.name] = spec.default_value;
  for (const auto& [name, value] : device) {
    const std::string key = "device." + name;
    const std::string& option = name;  // (clang 14 cannot capture a structured binding)
    auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const auto& s) { return s.name == option; });
    if (spec == specs.end()) {
      std::vector<std::string> names;
      for (const auto& s : specs) names.push_back(s.name);
      throw ConfigError(
          fmt::format("{}: key '{}': backend '{}' has no such device option; it has: {}",
                      locate(key), key, backend, fmt::join(names, ", ")));
    }
    if (std::string problem = check_option_value(*spec, value); !problem.empty()) {
      throw ConfigError(fmt::format("{}: key '{}': {}", locate(key), key, problem));
    }
    resolved[name] = value;
  }
  return resolved;
}

const std::vector<TaskSchema>& builtin_task_schemas() {
  static const std::vector<TaskSchema> schemas{
      {"matmul-bench", {"matmul_bench"}, {"matmul_bench"}},
      {"inference", {"model", "batch", "collective", "data", "inference"}, {}},
      {"pretrain",
       {"model", "batch", "collective", "data", "optimizer", "steps", "checkpoint"},
       {}},
      {"squad",
       {"model", "batch", "collective", "data", "optimizer", "checkpoint", "finetune"},
       {"finetune"}},
      {"glue",
       {"model", "batch", "collective", "data", "optimizer", "checkpoint", "finetune"},
       {"finetune"}}};
  return schemas;
}

const TaskSchema& builtin_task_schema(const std::string& name) {
  for (const auto& schema : builtin_task_schemas())
    if (schema.name == name) return schema;
  throw std::invalid_argument("no built-in task schema named " + name);
}

RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides,
                          const std::vector<TaskSchema>& tasks) {
  RunConfig config;
  config.file = file;
  YAML::Node root;
  std::error_code size_error;
  if (const auto bytes = std::filesystem::file_size(file, size_error);
      !size_error && bytes > kMaxConfigBytes) {
    throw ConfigError(fmt::format("{}: {} bytes: a config is a few KiB (at most {} read)",
                                  file.string(), bytes, kMaxConfigBytes));
  }
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::BadFile&) {
    throw ConfigError(fmt::format("{}: cannot read the config file", file.string()));
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}:{}: YAML syntax error: {}", file.string(), e.mark.line + 1,
                                  e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError(
        fmt::format("{}: expected a mapping of keys at the top level", file.string()));

  ConfigReader reader(config, file.string());
  reader.remember_lines(root, "");
  for (const auto& text : overrides) apply_override(root, text, config);

  reader.require_known_keys(root, "", config_section_keys(""));
  if (!root["backend"]) reader.fail("backend", "required: the backend to run on (cpu, ipu, gaudi)");
  config.backend = reader.scalar(root["backend"], "backend");
  if (root["plugin_paths"]) {
    const YAML::Node paths = root["plugin_paths"];
    if (!paths.IsSequence()) reader.fail("plugin_paths", "expected a list of directories");
    for (const auto& p : paths) {
      config.plugin_paths.push_back(from_current_directory(reader.scalar(p, "plugin_paths")));
    }
  }
  if (root["allow_world_writable_plugins"]) {
    // A config is input like any other file: it may not lower the trust
    // rules for the code we load.
    reader.fail("allow_world_writable_plugins",
                "is accepted only on the command line (--allow-world-writable-plugins), never "
                "from a config file");
  }
  if (root["device"]) {
    const YAML::Node device = root["device"];
    if (!device.IsMap()) reader.fail("device", "expected a mapping of device options");
    for (const auto& entry : device) {
      const std::string name = entry.first.Scalar();
      config.device[name] = reader.scalar(entry.second, "device." + name);
    }
  }
  std::vector<std::string> names;
  for (const auto& schema : tasks) names.push_back(schema.name);
  std::sort(names.begin(), names.end());
  if (!root["task"])
    reader.fail("task", fmt::format("required: one of {}", fmt::join(names, ", ")));
  config.task = reader.scalar(root["task"], "task");
  const auto schema = std::find_if(tasks.begin(), tasks.end(),
                                   [&](const TaskSchema& s) { return s.name == config.task; });
  if (schema == tasks.end()) {
    reader.fail("task", fmt::format("unknown task \"{}\"; this version runs: {}", config.task,
                                    fmt::join(names, ", ")));
  }
  const auto reads = [&](const std::string& section) {
    return std::find(schema->sections.begin(), schema->sections.end(), section) !=
           schema->sections.end();
  };
  for (const auto& section : schema->required) {
    if (!root[section]) reader.fail(section, fmt::format("required by task {}", config.task));
  }
  // Every section a task may read, in the order their readers depend on
  // each other (data after model); one the task does not read is an error.
  const std::vector<std::pair<std::string, std::function<void(const YAML::Node&)>>> sections{
      {"matmul_bench",
       [&](const YAML::Node& n) { read_matmul_bench(n, reader, config.matmul_bench); }},
      {"model", [&](const YAML::Node& n) { read_model(n, reader, config); }},
      {"batch", [&](const YAML::Node& n) { read_batch(n, reader, config); }},
      {"collective", [&](const YAML::Node& n) { read_collective(n, reader, config); }},
      {"data", [&](const YAML::Node& n) { read_data(n, reader, config); }},
      {"inference", [&](const YAML::Node& n) { read_inference(n, reader, config); }},
      {"optimizer", [&](const YAML::Node& n) { read_optimizer(n, reader, config); }},
      {"steps", [&](const YAML::Node& n) { config.steps = reader.integer(n, "steps", 1); }},
      {"checkpoint", [&](const YAML::Node& n) { read_checkpoint(n, reader, config); }},
      {"finetune", [&](const YAML::Node& n) { read_finetune(n, reader, config); }},
  };
  for (const auto& [section, read] : sections) {
    if (!root[section]) continue;
    if (!reads(section)) reader.fail(section, fmt::format("not used by task {}", config.task));
    read(root[section]);
  }
  if (config.task == "inference" && config.batch.replicas != 1) {
    reader.fail("batch.replicas",
                "inference runs one replica; run several processes for throughput");
  }
  if (config.task == "pretrain" && config.data.source == "text")
    reader.fail("data.source", "pretrain reads generated or pattern data");
  if (root["log"]) {
    const YAML::Node log = root["log"];
    reader.require_known_keys(log, "log", config_section_keys("log"));
    if (log["every"]) config.log_every = reader.integer(log["every"], "log.every", 1);
    if (log["level"]) {
      config.log_level = reader.scalar(log["level"], "log.level");
      static const std::vector<std::string> levels{"trace", "debug", "info",
                                                   "warn",  "error", "off"};
      if (std::find(levels.begin(), levels.end(), config.log_level) == levels.end()) {
        reader.fail("log.level", fmt::format("expected one of {}, got \"{}\"",
                                             fmt::join(levels, ", "), config.log_level));
      }
    }
    if (log["file"])
      config.log_file = from_current_directory(reader.scalar(log["file"], "log.file"));
  }
  return config;
}

}  // namespace polyhal
