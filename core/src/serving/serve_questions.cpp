#include "polyhal/app/serve_questions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "polyhal/app/serve_api.hpp"
#include "polyhal/app/squad_predictions.hpp"
#include "polyhal/error.hpp"
#include "util/utf8.hpp"

namespace polyhal {
namespace {

/// The reference's is_whitespace (squad_features.cpp splits words on it).
bool reference_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F;
}

/// Each whitespace word's first code point in `context`, and its length in
/// code points, in the order the SQuAD features number the words.
struct WordPlaces {
  std::vector<std::int64_t> start, length;
};

WordPlaces word_places(const std::string& context) {
  WordPlaces out;
  bool previous_space = true;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < context.size(); ++at) {
    const char32_t c = utf8::next(context, i);
    if (reference_whitespace(c)) {
      previous_space = true;
      continue;
    }
    if (previous_space) {
      out.start.push_back(at);
      out.length.push_back(0);
    }
    ++out.length.back();
    previous_space = false;
  }
  return out;
}

std::int64_t code_points(const std::string& text) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++n) utf8::next(text, i);
  return n;
}

/// Where `candidate`'s text lies in the context: within its words joined by
/// single spaces, mapped back to the words' own places.
void place_answer(const SquadCandidate& candidate, const std::vector<std::string>& words,
                  const WordPlaces& places, ServedAnswer& answer) {
  const auto first = static_cast<std::size_t>(candidate.first_word);
  const auto last = static_cast<std::size_t>(candidate.last_word);
  std::string span;
  for (std::size_t k = first; k <= last; ++k) span += (k > first ? " " : "") + words[k];
  const auto found = span.find(candidate.text);
  std::size_t byte = found == std::string::npos ? 0 : found;
  // The word holding that byte, and the code points before it in the word.
  std::size_t k = first;
  while (k < last && byte > words[k].size()) byte -= words[k++].size() + 1;
  answer.start = places.start[k] + code_points(words[k].substr(0, std::min(byte, words[k].size())));
  answer.end = found == std::string::npos ? places.start[last] + places.length[last]
                                          : answer.start + code_points(candidate.text);
  // Inside the span's words even where the text holds spaces the context did not.
  answer.end = std::min(answer.end, places.start[last] + places.length[last]);
}

}  // namespace

ServedQuestions question_features(const std::vector<std::string>& questions,
                                  const std::string& context, const Tokenizer& tokenizer,
                                  std::int64_t max_tokens, std::int64_t max_windows) {
  ServedQuestions out;
  out.squad.contexts.push_back(context);
  for (std::size_t i = 0; i < questions.size(); ++i)
    out.squad.questions.push_back({std::to_string(i), questions[i], {}, false, 0});
  SquadFeatureSettings settings;
  settings.max_seq_length = max_tokens;
  settings.max_query_length = std::min<std::int64_t>(64, max_tokens / 2);
  settings.doc_stride = std::max<std::int64_t>(1, std::min<std::int64_t>(128, max_tokens / 3));
  settings.max_features = max_windows;
  try {
    out.features = make_squad_features(out.squad, tokenizer, settings);
  } catch (const TooManySquadFeatures& e) {
    throw ApiError(413, fmt::format("{}, more than serve.max_inputs ({}): send a shorter context "
                                    "or fewer questions",
                                    e.what(), max_windows));
  } catch (const ConfigError& e) {
    throw ApiError(400, fmt::format("the question leaves no room for the context: {}", e.what()));
  }
  return out;
}

std::vector<std::vector<ServedAnswer>> served_answers(
    const ServedQuestions& questions, const std::vector<std::vector<float>>& outputs,
    const Tokenizer& tokenizer, std::int64_t max_tokens, std::int64_t top_k,
    std::int64_t max_answer_length) {
  const auto& features = questions.features.features;
  if (outputs.size() != features.size())
    throw std::invalid_argument("served_answers: one output per feature");
  // Logits past a feature's real tokens can never win: the lowest float.
  const float never = std::numeric_limits<float>::lowest();
  std::vector<std::vector<float>> starts(features.size()), ends(features.size());
  for (std::size_t f = 0; f < features.size(); ++f) {
    const std::size_t n = outputs[f].size() / 2;
    starts[f].assign(static_cast<std::size_t>(max_tokens), never);
    ends[f].assign(static_cast<std::size_t>(max_tokens), never);
    std::copy_n(outputs[f].begin(), n, starts[f].begin());
    std::copy_n(outputs[f].begin() + static_cast<std::ptrdiff_t>(n), n, ends[f].begin());
  }
  SquadPredictionSettings settings;
  settings.n_best = std::max<std::int64_t>(20, top_k);
  settings.max_answer_length = max_answer_length;
  settings.lower_case = tokenizer.lower_case();
  const auto predictions =
      predict_squad_answers(questions.squad, questions.features, starts, ends, tokenizer, settings);
  const WordPlaces places = word_places(questions.squad.contexts.front());
  const auto& words = questions.features.context_words.front();
  std::vector<std::vector<ServedAnswer>> out;
  for (const auto& prediction : predictions) {
    auto& answers = out.emplace_back();
    for (const auto& candidate : prediction.nbest) {
      if (static_cast<std::int64_t>(answers.size()) >= top_k) break;
      if (candidate.first_word < 0) continue;  // "empty": no span fits
      ServedAnswer answer{candidate.text, candidate.probability, 0, 0};
      place_answer(candidate, words, places, answer);
      answers.push_back(std::move(answer));
    }
  }
  return out;
}

}  // namespace polyhal
