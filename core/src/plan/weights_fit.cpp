#include "plan/weights_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "model/families/model_family.hpp"
#include "model/safetensors_index.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// The shape of the tensor whose name ends with `suffix` (any prefix: "bert.",
/// none, an optimizer slot's), or nothing.
const std::vector<std::int64_t>* shape_ending(
    const std::map<std::string, std::vector<std::int64_t>>& shapes, const std::string& suffix) {
  for (const auto& [name, shape] : shapes)
    if (name.ends_with(suffix)) return &shape;
  return nullptr;
}

/// 1 + the largest N of "encoder.layer.N." in the names; 0 when none.
std::int64_t layers_named(const std::map<std::string, std::vector<std::int64_t>>& shapes) {
  std::int64_t layers = 0;
  const std::string marker = "encoder.layer.";
  for (const auto& [name, shape] : shapes) {
    const auto at = name.find(marker);
    if (at == std::string::npos) continue;
    const char* first = name.data() + at + marker.size();
    std::int64_t index = 0;
    const auto [end, error] = std::from_chars(first, name.data() + name.size(), index);
    if (error == std::errc() && end != first && index >= 0 && index < (1 << 20))
      layers = std::max(layers, index + 1);
  }
  return layers;
}

}  // namespace

void check_weights_fit(const RunConfig& config, const ModelPlan& model) {
  std::error_code ec;
  if ((model.weights.extension() != ".safetensors" && !is_safetensors_index(model.weights)) ||
      !std::filesystem::is_regular_file(model.weights, ec))
    return;
  const std::string& key = model.weights_key;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  try {
    shapes = read_safetensors_shapes(model.weights);
  } catch (const ConfigError& e) {
    config.fail(key, e.what());
  }
  const BertConfig& want = model.dims;
  std::vector<std::string> differences;
  const auto compare = [&](const char* name, std::int64_t found, std::int64_t wanted) {
    if (found != wanted)
      differences.push_back(fmt::format("{} {} (the run's: {})", name, found, wanted));
  };
  if (const auto* words = shape_ending(shapes, "embeddings.word_embeddings.weight");
      words && words->size() == 2) {
    compare("vocab_size", (*words)[0], want.vocab_size);
    compare(want.embedding_size > 0 ? "embedding_size" : "hidden_size", (*words)[1],
            want.embedding_width());
  }
  // Position embeddings are left to the loader: phase 2 extends a phase-1
  // table (docs/bert.md), and a shorter one is its error.
  if (const auto* types = shape_ending(shapes, "embeddings.token_type_embeddings.weight");
      types && types->size() == 2)
    compare("type_vocab_size", (*types)[0], want.type_vocab_size);
  if (const std::int64_t layers = layers_named(shapes); layers > 0)
    compare("num_hidden_layers", layers, want.num_hidden_layers);
  if (const auto* inner =
          shape_ending(shapes, families::model_family(want.model_type).intermediate_weight());
      inner && inner->size() == 2)
    compare("intermediate_size", (*inner)[0], want.intermediate_size);
  if (differences.empty()) return;
  const auto beside = model.weights.parent_path() / "config.json";
  const bool config_beside = std::filesystem::exists(beside, ec) && model.config_file != beside;
  const std::string advice =
      config_beside ? fmt::format(
                          "set model.dir: {} (or model.hf_config: {}, the config.json beside the "
                          "weights) instead",
                          model.weights.parent_path().string(), beside.string())
                    : "set model.hf_config to this model's config.json, or the model.* dimensions";
  config.fail(
      key, fmt::format("{} holds another model than the run's dimensions ({}): {}; {}",
                       model.weights.string(), model.origin, fmt::join(differences, ", "), advice));
}

}  // namespace polyhal
