// What a run that infers on text opens from its model card: the weights,
// the tokenizer and the sentence pooling (text inference and the served
// model alike).
#include "serving/model_inputs.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// A NaN or infinity in model.weights turns every output into null: refused
/// by name, as checkpoint.init refuses one (issue 53, item 9).
void check_finite_weights(const RunConfig& config, const ModelPlan& card,
                          const TensorMap& weights) {
  for (const auto& [name, tensor] : weights) {
    const auto bad = std::find_if(tensor.values.begin(), tensor.values.end(),
                                  [](float x) { return !std::isfinite(x); });
    if (bad != tensor.values.end())
      throw config.error(
          card.weights_key,
          fmt::format("{}: tensor '{}' holds {} at element {}: no output computed "
                      "from it would be a number (weights of a run that diverged?)",
                      card.model_weights.string(), name, *bad, bad - tensor.values.begin()));
  }
}

}  // namespace

TensorMap read_inference_weights(const RunConfig& config, const ModelPlan& card,
                                 const TaskHead& head, bool with_heads, bool* pooler_absent,
                                 TensorMap* head_tensors) {
  const BertConfig& model = card.dims;
  const auto& file = card.model_weights;
  if (file.empty()) return init_bert_weights(model, config.model.seed, head);
  std::vector<std::string> unused;
  TensorMap weights =
      with_heads ? load_bert_weights(file, model, head)
                 : load_bert_encoder_weights(file, model, &unused, pooler_absent, head_tensors);
  if (!unused.empty())
    spdlog::info("weights: {} head tensors not used by the encoder (model.head is none)",
                 unused.size());
  if (*pooler_absent)
    spdlog::info(
        "weights: {} has no pooler (bert.pooler.dense.*), as transformers saves a model without "
        "one: the output lines have no \"pooled\"; inference.pooling mean, cls and max do not "
        "need it",
        file.string());
  check_finite_weights(config, card, weights);
  return weights;
}

std::unique_ptr<Tokenizer> open_text_tokenizer(const ModelPlan& card) {
  return open_tokenizer(card.tokenizer);  // the card's spec checks the model's vocab_size
}

SentencePooling text_pooling(const std::string& pooling_key, const std::string& normalize_key,
                             const ModelPlan& card) {
  const SentencePooling pooling =
      resolve_sentence_pooling(pooling_key, normalize_key,
                               !card.model_dir.empty()       ? card.model_dir
                               : !card.config_file.empty()   ? card.config_file.parent_path()
                               : !card.model_weights.empty() ? card.model_weights.parent_path()
                                                             : std::filesystem::path());
  if (pooling.mode != "none")
    spdlog::info("sentence embeddings: {} pooling{}{}", pooling.mode,
                 pooling.normalize ? ", L2-normalised" : "",
                 pooling.source.empty() ? "" : " (from " + pooling.source + ")");
  return pooling;
}

}  // namespace polyhal
