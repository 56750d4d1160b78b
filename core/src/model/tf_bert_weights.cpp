#include "polyhal/app/tf_bert_weights.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>

#include "model/tf_groupbert_layout.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

std::vector<std::string> split(const std::string& name, char by) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at = name.find(by); at != std::string::npos; at = name.find(by, start)) {
    parts.push_back(name.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

/// "layer_12" -> "12".
std::optional<std::string> layer_number(const std::string& part) {
  if (!part.starts_with("layer_") || part.size() == 6) return std::nullopt;
  int n = 0;
  const auto* end = part.data() + part.size();
  const auto [ptr, ec] = std::from_chars(part.data() + 6, end, n);
  if (ec != std::errc() || ptr != end || n < 0) return std::nullopt;
  return std::to_string(n);
}

}  // namespace

bool is_tf_training_state(const std::string& name) {
  for (const char* suffix :
       {"/adam_m", "/adam_v", "/lamb_m", "/lamb_v", "/Adam", "/Adam_1", "/Momentum", "/LAMB",
        "/LAMB_1", "/accumulator", "/ExponentialMovingAverage"})
    if (name.ends_with(suffix)) return true;
  for (const char* part : {"AdamWeightDecayOptimizer", "LAMBOptimizer", "/.OPTIMIZER_SLOT/"})
    if (name.find(part) != std::string::npos) return true;
  return name == "global_step" || name == "_CHECKPOINTABLE_OBJECT_GRAPH" ||
         name == "save_counter" || name.ends_with("/iter") || name.ends_with("/iterations") ||
         name.ends_with("beta1_power") || name.ends_with("beta2_power") ||
         name.starts_with("optimizer/") || name.starts_with("save_counter/") ||
         name.find("loss_scale") != std::string::npos || name.ends_with("good_steps");
}

std::optional<TfBertName> hf_name_of_tf_variable(const std::string& tf_name) {
  const auto parts = split(tf_name, '/');
  // Heads of Google's fine-tuning scripts: run_squad.py's "cls/squad/output_*",
  // run_classifier.py's top-level "output_*".
  if (tf_name == "cls/squad/output_weights") return TfBertName{"qa_outputs.weight", false};
  if (tf_name == "cls/squad/output_bias") return TfBertName{"qa_outputs.bias", false};
  if (tf_name == "output_weights") return TfBertName{"classifier.weight", false};
  if (tf_name == "output_bias") return TfBertName{"classifier.bias", false};
  if (parts.size() < 2 || (parts[0] != "bert" && parts[0] != "cls")) return std::nullopt;
  TfBertName out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& part = parts[i];
    std::string piece = part;
    if (part.empty()) return std::nullopt;
    if (const auto n = layer_number(part)) {
      piece = "layer." + *n;
    } else if (part == "kernel") {
      piece = "weight";
      out.transpose = true;
    } else if (part == "gamma") {
      piece = "weight";
    } else if (part == "beta") {
      piece = "bias";
    } else if (part == "output_weights") {
      piece = "weight";  // stored [out, in]: used with transpose_b in Google's code
    } else if (part == "output_bias") {
      piece = "bias";
    }
    if (!out.hf.empty()) out.hf += '.';
    out.hf += piece;
  }
  if (parts.back().ends_with("_embeddings")) out.hf += ".weight";
  return out;
}

namespace {

/// Variable `name` under its Hugging Face name (kernels transposed); a name
/// of no BERT kept as it is.
std::pair<std::string, HostTensor> read_as_hf(const TfCheckpoint& checkpoint,
                                              const std::string& name,
                                              const std::string& variable) {
  const auto mapped = hf_name_of_tf_variable(variable);
  HostTensor tensor = checkpoint.read(name);
  if (mapped && mapped->transpose && tensor.shape.size() == 2) {
    const auto rows = static_cast<std::size_t>(tensor.shape[0]);
    const auto cols = static_cast<std::size_t>(tensor.shape[1]);
    std::vector<float> transposed(tensor.values.size());
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) transposed[c * rows + r] = tensor.values[r * cols + c];
    tensor.values = std::move(transposed);
    tensor.shape = {tensor.shape[1], tensor.shape[0]};
  }
  return {mapped ? mapped->hf : variable, std::move(tensor)};
}

}  // namespace

TfOptimizerState read_tf_optimizer_state(const std::filesystem::path& path) {
  const TfCheckpoint checkpoint(path);
  TfOptimizerState out;
  // Google's AdamWeightDecayOptimizer and the MLPerf LAMB name their slots
  // adam_m/adam_v (lamb_m/lamb_v in some forks); tf.compat.v1's Adam, Adam
  // and Adam_1.
  const std::pair<const char*, bool> slots[] = {{"/adam_m", true},  {"/lamb_m", true},
                                                {"/Adam", true},    {"/adam_v", false},
                                                {"/lamb_v", false}, {"/Adam_1", false}};
  for (const auto& [name, entry] : checkpoint.entries()) {
    if (name == "global_step" && entry.element_bytes > 0) {
      // Exactly, and a step a checkpoint name can hold (CheckpointStore: up
      // to 18 digits): a resumed run finds what convert writes.
      out.global_step = checkpoint.read_step(name);
      continue;
    }
    for (const auto& [suffix, first] : slots) {
      if (!name.ends_with(suffix) || entry.element_bytes == 0) continue;
      const std::string variable = name.substr(0, name.size() - std::string_view(suffix).size());
      auto [hf, tensor] = read_as_hf(checkpoint, name, variable);
      (first ? out.m : out.v).emplace(std::move(hf), std::move(tensor));
      break;
    }
  }
  if (has_graphcore_groupbert_layers(out.m)) {
    out.m = graphcore_groupbert_layout(std::move(out.m), /*fill_missing_biases=*/false);
    out.v = graphcore_groupbert_layout(std::move(out.v), /*fill_missing_biases=*/false);
  }
  return out;
}

TensorMap read_tf_bert_weights(const std::filesystem::path& path, TfReadReport* report) {
  const TfCheckpoint checkpoint(path);
  TensorMap out;
  std::map<std::string, std::string> read_from;  // Hugging Face name -> TensorFlow name
  for (const auto& [name, entry] : checkpoint.entries()) {
    if (is_tf_training_state(name)) {
      if (report) report->training_state.push_back(name);
      continue;
    }
    if (entry.element_bytes == 0) {
      // A weight of a type polyhal does not read is named as what it is,
      // not later as a missing tensor.
      if (const auto mapped = hf_name_of_tf_variable(name))
        throw ConfigError(fmt::format(
            "{}: tensor '{}' ({}) is {}: polyhal reads weights stored as float, double, half, "
            "bfloat16, int32 or int64",
            path.string(), name, mapped->hf, entry.dtype));
      if (report) report->other.push_back(name);
      continue;
    }
    auto [hf, tensor] = read_as_hf(checkpoint, name, name);
    // layer_01 and layer_1 are one layer: which one is meant, only the
    // person who wrote the file knows.
    if (const auto [at, fresh] = read_from.emplace(hf, name); !fresh)
      throw ConfigError(
          fmt::format("{}: tensors '{}' and '{}' are both {}: one model cannot "
                      "have both",
                      path.string(), at->second, name, hf));
    out.emplace(std::move(hf), std::move(tensor));
  }
  if (has_graphcore_groupbert_layers(out)) return graphcore_groupbert_layout(std::move(out));
  return out;
}

}  // namespace polyhal
