// The embedding server's model: text inference's setup (inference_task.cpp)
// held open, and its packed rows (packed_text_inference.hpp) run per batch.
#include "polyhal/app/text_embedder.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "inference_section.hpp"
#include "inference_setup.hpp"
#include "packed_text_inference.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "tasks/inference_precision.hpp"
#include "tasks/plan_fit.hpp"

namespace polyhal {

struct TextEmbedder::Impl {
  BertConfig dims;
  std::string name, pooling_text;
  BertShape shape;
  WordPieceTokenizer tokenizer;
  SentencePooling pooling;
  BertInference bert;
  Encoding filler;
  bool normalizes = false;  // the model's own choice; embed() returns unnormalised vectors

  Impl(Device& device, const RunConfig& config, const RunPlan& plan)
      : dims(plan.model.dims),
        name(plan.model.name),
        shape{config.batch.micro, config.model.seq_len},
        tokenizer(open_text_tokenizer(config, dims)),
        pooling(text_pooling(config)),
        bert(refusing_precision(config,
                                [&] {
                                  return BertInference(
                                      device, dims, shape,
                                      inference_precision(config, plan.precision, dims, device),
                                      false, true);
                                })),
        filler(tokenizer.encode("", std::nullopt, shape.seq)) {
    require_plan_fits(bert.plan_memory());
    bool pooler_absent = false;
    bert.load_weights(read_inference_weights(config, dims, {}, false, &pooler_absent));
    normalizes = pooling.normalize;
    pooling.normalize = false;
    pooling_text = fmt::format("{} pooling{}{}", pooling.mode, normalizes ? ", L2-normalised" : "",
                               pooling.source.empty() ? "" : " (from " + pooling.source + ")");
  }
};

TextEmbedder::TextEmbedder(Device& device, const RunConfig& config, const RunPlan& plan) {
  if (config.model.head != "none" || config.model.heads)
    throw config.error(config.model.heads ? "model.heads" : "model.head",
                       "an embedding server runs the encoder alone: set model.head: none and "
                       "model.heads: false");
  impl_ = std::make_unique<Impl>(device, config, plan);
  if (impl_->pooling.mode == "none")
    throw config.error("inference.pooling",
                       "none: an embedding server needs a sentence embedding; set mean, cls or "
                       "max (or auto with a sentence-transformers directory)");
}

TextEmbedder::~TextEmbedder() = default;

TextEmbedder::Text TextEmbedder::tokenize(const std::string& text) const {
  const auto& m = *impl_;
  const LineTokens tokens = line_tokens(m.tokenizer.encode(text, std::nullopt, m.shape.seq));
  Text out{tokens.ids, tokens.types, false};
  // Only a full encoding can have lost tokens: count them then.
  if (static_cast<std::int64_t>(out.ids.size()) == m.shape.seq)
    out.truncated = static_cast<std::int64_t>(m.tokenizer.tokenize(text).size()) + 2 > m.shape.seq;
  return out;
}

std::vector<std::vector<float>> TextEmbedder::embed(const std::vector<Text>& texts) {
  auto& m = *impl_;
  std::vector<LineTokens> lines(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto n = texts[i].ids.size();
    if (n < 2 || static_cast<std::int64_t>(n) > m.shape.seq || texts[i].types.size() != n)
      throw Error(ExitCode::failure, fmt::format("embed: text {} has {} tokens", i, n));
    lines[i] = {texts[i].ids, texts[i].types};
  }
  std::vector<std::vector<float>> out(texts.size());
  run_packed_lines(m.bert, lines, m.filler, [&](std::size_t i, std::span<const float> hidden) {
    out[i] = pool_sentence(hidden, std::vector<std::int32_t>(lines[i].ids.size(), 1),
                           m.dims.hidden_size, m.pooling);
  });
  return out;
}

std::int64_t TextEmbedder::dimensions() const noexcept {
  return impl_->dims.hidden_size;
}
std::int64_t TextEmbedder::max_tokens() const noexcept {
  return impl_->shape.seq;
}
std::int64_t TextEmbedder::tokens_per_call() const noexcept {
  return impl_->shape.batch * impl_->shape.seq;
}
const std::string& TextEmbedder::model_name() const noexcept {
  return impl_->name;
}
bool TextEmbedder::normalizes() const noexcept {
  return impl_->normalizes;
}
const std::string& TextEmbedder::pooling_description() const noexcept {
  return impl_->pooling_text;
}

}  // namespace polyhal
