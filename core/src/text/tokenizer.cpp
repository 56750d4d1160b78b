// What every tokenizer shares (polyhal/app/tokenizer.hpp): framing ids with
// the special tokens, truncation and padding; and open_tokenizer, the one
// place that picks a tokenizer's kind from its file.
#include "polyhal/app/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/error.hpp"
#include "text/pipeline_tokenizer.hpp"
#include "text/tokenizer_json.hpp"
#include "text/truncation.hpp"

namespace polyhal {
namespace {

/// Cuts `a` and `b` to `room` tokens together, longest first.
void truncate_pair(std::vector<std::int32_t>& a, std::vector<std::int32_t>& b, std::size_t room,
                   PairTruncation rule) {
  if (a.size() + b.size() <= room) return;
  if (rule == PairTruncation::one_at_a_time) {
    // The longer side loses its last token, the second on a tie.
    while (a.size() + b.size() > room) (a.size() > b.size() ? a : b).pop_back();
    return;
  }
  const auto [keep_a, keep_b] = text::longest_first_lengths(a.size(), b.size(), room);
  a.resize(keep_a);
  b.resize(keep_b);
}

}  // namespace

std::vector<std::int32_t> Tokenizer::ids(const std::string& text) const {
  std::vector<std::int32_t> out;
  for (const auto& piece : tokenize(text)) out.push_back(id(piece));
  return out;
}

Encoding Tokenizer::encode_ids(std::vector<std::int32_t> a,
                               std::optional<std::vector<std::int32_t>> b, std::int64_t max_length,
                               bool* truncated) const {
  const SpecialTokenIds& special = special_ids();
  const std::size_t framing = b ? 3 : 2;
  const auto limit = static_cast<std::size_t>(
      std::max<std::int64_t>(max_length, static_cast<std::int64_t>(framing)));
  std::vector<std::int32_t> none;
  std::vector<std::int32_t>& second = b ? *b : none;
  if (truncated) *truncated = a.size() + second.size() + framing > limit;
  truncate_pair(a, second, limit - framing, pair_truncation());
  Encoding e;
  e.tokens.reserve(limit);
  e.input_ids.reserve(limit);
  e.token_type_ids.reserve(limit);
  e.attention_mask.reserve(limit);
  auto add = [&](std::int32_t id, std::int32_t type, std::int32_t mask) {
    e.tokens.push_back(token(id));
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(mask);
  };
  add(special.cls, 0, 1);
  for (const std::int32_t id : a) add(id, 0, 1);
  add(special.sep, 0, 1);
  if (b) {
    for (const std::int32_t id : second) add(id, 1, 1);
    add(special.sep, 1, 1);
  }
  while (e.input_ids.size() < limit) add(special.pad, 0, 0);
  return e;
}

Encoding Tokenizer::encode(const std::string& text_a, const std::optional<std::string>& text_b,
                           std::int64_t max_length, bool* truncated) const {
  std::optional<std::vector<std::int32_t>> b;
  if (text_b) b = ids(*text_b);
  return encode_ids(ids(text_a), std::move(b), max_length, truncated);
}

std::vector<Encoding> Tokenizer::encode_windows(const std::string& text_a,
                                                const std::optional<std::string>& text_b,
                                                std::int64_t max_length,
                                                const Truncation& truncation) const {
  if (truncation.strategy != Truncation::Strategy::longest_first ||
      truncation.direction != Truncation::Direction::right || truncation.stride != 0)
    throw ConfigError(
        "truncation of one side only, from the left or with a stride needs a tokenizer.json (a "
        "vocab.txt truncates longest first, from the right)");
  return {encode(text_a, text_b, max_length)};
}

namespace {

std::unique_ptr<Tokenizer> open_unchecked(const TokenizerSpec& spec) {
  if (spec.file.extension() == ".model")
    return std::make_unique<text::PipelineTokenizer>(pipeline_of_sentencepiece(spec.file),
                                                     spec.file, spec.options);
  if (spec.file.extension() == ".json") {
    TokenizerOptions options = spec.options;
    options.pair_truncation = PairTruncation::halves;
    const nlohmann::json pipeline = spec.file.filename() == "vocab.json"
                                        ? pipeline_of_bpe_files(spec.file)
                                        : read_tokenizer_json_file(spec.file);
    return std::make_unique<text::PipelineTokenizer>(pipeline, spec.file, options);
  }
  return std::make_unique<WordPieceTokenizer>(spec.file, spec.options);
}

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer(const TokenizerSpec& spec) {
  auto tokenizer = open_unchecked(spec);
  if (spec.model_vocab > 0 && static_cast<std::int64_t>(tokenizer->vocab_size()) > spec.model_vocab)
    throw ConfigError(fmt::format("{}: vocabulary has {} tokens but the model's vocab_size is {}",
                                  spec.file.string(), tokenizer->vocab_size(), spec.model_vocab));
  return tokenizer;
}

}  // namespace polyhal
