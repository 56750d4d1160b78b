#include "tasks/sequence_fit.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Where the model's dimensions were read: what a user opens to change them.
std::string model_source(const RunConfig& config) {
  if (!config.model.hf_config.empty()) return config.model.hf_config.string();
  if (!config.checkpoint.init.empty())
    return fmt::format("the config of checkpoint.init {}", config.checkpoint.init.string());
  return fmt::format("preset {}", config.model.preset);
}

}  // namespace

std::string model_origin(const RunConfig& config) {
  std::string out;
  for (const auto& [key, value] : config.model.dims) out += config.locate("model." + key) + ", ";
  return out + model_source(config);
}

void check_sequence_fits(const RunConfig& config, const BertConfig& model) {
  const std::int64_t seq = config.model.seq_len;
  if (seq > model.max_position_embeddings)
    config.fail("model.seq_len",
                fmt::format("{} tokens, but the model has {} position embeddings "
                            "(max_position_embeddings of {})",
                            seq, model.max_position_embeddings, model_source(config)));
  if (model.groupbert() && model.conv_kernel_size > seq)
    config.fail("model.seq_len",
                fmt::format("{} tokens, fewer than GroupBERT's convolution kernel of {} "
                            "positions (groupbert_conv_kernel_size of {})",
                            seq, model.conv_kernel_size, model_source(config)));
}

}  // namespace polyhal
