// A TensorFlow pre-training checkpoint as a polyhal checkpoint
// (convert_checkpoint.hpp): the weights, the moments under the names
// BertTraining's state uses (optimizer.m.*, optimizer.v.*), the step.
#include <fmt/format.h>

#include <tuple>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/convert_checkpoint.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

ConvertResult convert_tf_to_checkpoint(const ConvertOptions& options) {
  TfModel model = read_tf_model(options);
  ConvertResult& r = model.result;
  const auto where = r.checkpoint.string();
  if (r.head.kind != TaskHead::Kind::pretraining)
    throw ConfigError(fmt::format(
        "{}: a {} checkpoint: --to checkpoint makes a pre-training checkpoint to resume; "
        "convert it to a Hugging Face directory (--to hf) and start from it with checkpoint.init",
        where, hf_architecture(r.head)));
  const CheckpointStore store(options.output);
  if (const auto existing = store.latest())
    throw ConfigError(fmt::format("{}: already holds {}: give an empty or new directory",
                                  options.output.string(), existing->filename().string()));
  TfOptimizerState state = read_tf_optimizer_state(r.checkpoint);
  if (!state.global_step)
    throw ConfigError(fmt::format(
        "{}: no global_step: nothing says where to resume; --to hf and checkpoint.init start "
        "from the weights",
        where));
  if (*state.global_step > kMaxCheckpointStep)
    throw ConfigError(
        fmt::format("{}: global_step {} is beyond any run", where, *state.global_step));
  const TensorMap m = canonical_bert_weights(std::move(state.m));
  const TensorMap v = canonical_bert_weights(std::move(state.v));
  TensorMap out;
  std::vector<std::string> missing;
  for (auto& [name, weight] : model.weights) {
    for (const auto& [prefix, moments, what] :
         {std::tuple{"optimizer.m.", &m, "first"}, std::tuple{"optimizer.v.", &v, "second"}}) {
      const auto it = moments->find(name);
      if (it == moments->end()) {
        missing.push_back(prefix + name);
        continue;
      }
      if (it->second.shape != weight.shape)
        throw ConfigError(fmt::format("{}: the {} moment of {} has shape {}, the weight {}", where,
                                      what, name, shape_string(it->second.shape),
                                      shape_string(weight.shape)));
      out.emplace(prefix + name, it->second);
    }
    out.emplace(name, std::move(weight));
  }
  if (!missing.empty())
    throw ConfigError(fmt::format(
        "{}: {} optimizer moments missing ({}{}) for {} weights: --to hf and checkpoint.init "
        "start from the weights with a fresh optimizer",
        where, missing.size(), missing.front(), missing.size() > 1 ? ", ..." : "", r.tensors));
  check_state_values(r.checkpoint, out);
  store.save(*state.global_step, out,
             {{"writer", "polyhal pretrain"}, {"model", "converted"}, {"converted_from", where}});
  return r;
}

}  // namespace polyhal
