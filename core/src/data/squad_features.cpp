// SQuAD examples into BERT features, step for step as the reference
// (run_squad.py's read_squad_examples and convert_examples_to_features):
// whitespace words with a code point -> word map, answers mapped to words
// and then to WordPiece tokens with the improved-span search, the context
// cut into windows of doc_stride, and each token's max-context window.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "polyhal/app/squad_data.hpp"
#include "polyhal/error.hpp"
#include "util/utf8.hpp"

namespace polyhal {
namespace {

/// The reference's is_whitespace: space, tab, CR, LF and U+202F.
bool reference_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F;
}

/// Whitespace words and, per code point, the word it belongs to.
struct Words {
  std::vector<std::string> words;
  std::vector<std::int64_t> word_of_char;
};

Words split_words(const std::string& context) {
  Words out;
  bool previous_space = true;
  for (std::size_t i = 0; i < context.size();) {
    const std::size_t begin = i;
    const char32_t c = utf8::next(context, i);
    if (reference_whitespace(c)) {
      previous_space = true;
    } else {
      if (previous_space) out.words.emplace_back();
      out.words.back() += context.substr(begin, i - begin);
      previous_space = false;
    }
    out.word_of_char.push_back(static_cast<std::int64_t>(out.words.size()) - 1);
  }
  return out;
}

std::string joined(const std::vector<std::string>& tokens, std::size_t first, std::size_t last) {
  std::string out;
  for (std::size_t k = first; k <= last; ++k) {
    if (k > first) out += ' ';
    out += tokens[k];
  }
  return out;
}

/// The reference's _improve_answer_span: the smallest token span inside
/// [start, end] whose tokens spell the tokenised answer.
std::pair<std::int64_t, std::int64_t> improve_span(const std::vector<std::string>& doc_tokens,
                                                   std::int64_t start, std::int64_t end,
                                                   const std::string& answer_tokens) {
  for (std::int64_t s = start; s <= end; ++s) {
    for (std::int64_t e = end; e >= s; --e) {
      if (joined(doc_tokens, static_cast<std::size_t>(s), static_cast<std::size_t>(e)) ==
          answer_tokens)
        return {s, e};
    }
  }
  return {start, end};
}

struct Window {
  std::int64_t start, length;
};

/// The reference's _check_is_max_context. Only the windows next to
/// `current` can hold `position` (starts rise and ends never fall), so only
/// they are scored, in the reference's order: the work per token is the
/// windows overlapping it, not all of them.
bool is_max_context(const std::vector<Window>& windows, std::size_t current,
                    std::int64_t position) {
  std::size_t lo = current, hi = current;
  while (lo > 0 && windows[lo - 1].start + windows[lo - 1].length - 1 >= position) --lo;
  while (hi + 1 < windows.size() && windows[hi + 1].start <= position) ++hi;
  double best_score = -1;
  std::size_t best = 0;
  for (std::size_t w = lo; w <= hi; ++w) {
    const auto& span = windows[w];
    const std::int64_t end = span.start + span.length - 1;
    if (position < span.start || position > end) continue;
    const std::int64_t left = position - span.start, right = end - position;
    const double score =
        static_cast<double>(std::min(left, right)) + 0.01 * static_cast<double>(span.length);
    if (score > best_score) {
      best_score = score;
      best = w;
    }
  }
  return best == current;
}

/// Refuses `count` features past settings.max_features, before they are built.
void check_feature_count(std::size_t count, const SquadFeatureSettings& settings) {
  if (settings.max_features > 0 && static_cast<std::int64_t>(count) > settings.max_features)
    throw TooManySquadFeatures(
        fmt::format("the questions over this context make more than {} windows of {} tokens",
                    settings.max_features, settings.max_seq_length));
}

/// A context's WordPiece tokens and the maps between them and its words.
struct ContextTokens {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> token_word, word_first_token;
};

ContextTokens context_tokens(const Words& words, const Tokenizer& tokenizer) {
  ContextTokens out;
  for (std::size_t w = 0; w < words.words.size(); ++w) {
    out.word_first_token.push_back(static_cast<std::int64_t>(out.tokens.size()));
    for (auto& piece : tokenizer.tokenize(words.words[w])) {
      out.token_word.push_back(static_cast<std::int64_t>(w));
      out.tokens.push_back(std::move(piece));
    }
  }
  return out;
}

/// The context tokens holding `answer` (first, last), improved as the
/// reference does; nothing when the words at its characters do not contain
/// its text ("could not find answer").
std::optional<std::pair<std::int64_t, std::int64_t>> answer_span(const SquadAnswer& answer,
                                                                 const Words& words,
                                                                 const ContextTokens& context,
                                                                 const Tokenizer& tokenizer) {
  std::int64_t length = 0;
  for (std::size_t i = 0; i < answer.text.size();) {
    utf8::next(answer.text, i);
    ++length;
  }
  const std::int64_t first_char = answer.start, last_char = answer.start + length - 1;
  const auto& of = words.word_of_char;
  const bool inside = length > 0 && last_char < static_cast<std::int64_t>(of.size());
  const std::int64_t first_word = inside ? of[static_cast<std::size_t>(first_char)] : -1;
  const std::int64_t last_word = inside ? of[static_cast<std::size_t>(last_char)] : -1;
  // The words must contain the answer's whitespace-cleaned text.
  std::string cleaned;
  for (const auto& w : split_words(answer.text).words) cleaned += (cleaned.empty() ? "" : " ") + w;
  if (first_word < 0 || last_word < first_word ||
      joined(words.words, static_cast<std::size_t>(first_word), static_cast<std::size_t>(last_word))
              .find(cleaned) == std::string::npos)
    return std::nullopt;
  const auto& first_token = context.word_first_token;
  const std::int64_t start = first_token[static_cast<std::size_t>(first_word)];
  const std::int64_t end = static_cast<std::size_t>(last_word) + 1 < first_token.size()
                               ? first_token[static_cast<std::size_t>(last_word) + 1] - 1
                               : static_cast<std::int64_t>(context.tokens.size()) - 1;
  std::string answer_tokens;
  for (const auto& t : tokenizer.tokenize(answer.text))
    answer_tokens += (answer_tokens.empty() ? "" : " ") + t;
  return improve_span(context.tokens, start, end, answer_tokens);
}

}  // namespace

SquadFeatures make_squad_features(const SquadFile& squad, const Tokenizer& tokenizer,
                                  const SquadFeatureSettings& settings) {
  SquadFeatures out;
  std::vector<Words> contexts;
  for (const auto& context : squad.contexts) {
    contexts.push_back(split_words(context));
    out.context_words.push_back(contexts.back().words);
  }
  const std::int32_t pad = tokenizer.special_ids().pad;
  const std::string& cls = tokenizer.token(tokenizer.special_ids().cls);
  const std::string& sep = tokenizer.token(tokenizer.special_ids().sep);
  std::vector<std::optional<ContextTokens>> tokenized(contexts.size());
  for (std::size_t q = 0; q < squad.questions.size(); ++q) {
    const SquadQuestion& question = squad.questions[q];
    const Words& words = contexts.at(question.context);
    auto query = tokenizer.tokenize(question.question);
    if (static_cast<std::int64_t>(query.size()) > settings.max_query_length)
      query.resize(static_cast<std::size_t>(settings.max_query_length));
    // Context words -> WordPiece tokens, once per context (SQuAD asks
    // several questions of each).
    auto& cached = tokenized[question.context];
    if (!cached) cached = context_tokens(words, tokenizer);
    const std::vector<std::string>& doc_tokens = cached->tokens;
    const std::vector<std::int64_t>& token_word = cached->token_word;
    std::int64_t answer_start = -1, answer_end = -1;
    if (settings.training && !question.impossible && !question.answers.empty()) {
      const auto span = answer_span(question.answers.front(), words, *cached, tokenizer);
      if (!span) {
        ++out.unfound_answers;
        continue;
      }
      std::tie(answer_start, answer_end) = *span;
    }
    const std::int64_t room = settings.max_seq_length - static_cast<std::int64_t>(query.size()) - 3;
    if (room < 1) {
      throw ConfigError(fmt::format(
          "SQuAD features: max_seq_length {} leaves no room for the context after a question "
          "of {} tokens (max_query_length {})",
          settings.max_seq_length, query.size(), settings.max_query_length));
    }
    std::vector<Window> windows;
    for (std::int64_t start = 0; start < static_cast<std::int64_t>(doc_tokens.size());) {
      const std::int64_t length =
          std::min<std::int64_t>(static_cast<std::int64_t>(doc_tokens.size()) - start, room);
      windows.push_back({start, length});
      if (start + length == static_cast<std::int64_t>(doc_tokens.size())) break;
      start += std::min(length, settings.doc_stride);
      check_feature_count(out.features.size() + windows.size(), settings);
    }
    if (windows.empty()) windows.push_back({0, 0});  // an empty context: the question alone
    check_feature_count(out.features.size() + windows.size(), settings);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      SquadFeature f;
      f.question = q;
      f.window = static_cast<std::int64_t>(w);
      f.tokens.push_back(cls);
      for (const auto& t : query) f.tokens.push_back(t);
      f.tokens.push_back(sep);
      const auto offset = static_cast<std::int64_t>(f.tokens.size());
      f.token_type_ids.assign(f.tokens.size(), 0);
      f.max_context.assign(f.tokens.size(), false);
      for (std::int64_t k = 0; k < windows[w].length; ++k) {
        const std::int64_t token = windows[w].start + k;
        f.token_to_word[static_cast<std::int64_t>(f.tokens.size())] =
            token_word[static_cast<std::size_t>(token)];
        f.max_context.push_back(is_max_context(windows, w, token));
        f.tokens.push_back(doc_tokens[static_cast<std::size_t>(token)]);
        f.token_type_ids.push_back(1);
      }
      f.tokens.push_back(sep);
      f.token_type_ids.push_back(1);
      f.max_context.push_back(false);
      for (const auto& t : f.tokens) f.input_ids.push_back(tokenizer.id(t));
      f.attention_mask.assign(f.tokens.size(), 1);
      const auto length = static_cast<std::size_t>(settings.max_seq_length);
      f.input_ids.resize(length, pad);
      f.token_type_ids.resize(length, 0);
      f.attention_mask.resize(length, 0);
      f.max_context.resize(length, false);
      if (answer_start >= 0) {
        const std::int64_t first = windows[w].start, last = first + windows[w].length - 1;
        if (answer_start >= first && answer_end <= last) {
          f.start_position = static_cast<std::int32_t>(answer_start - first + offset);
          f.end_position = static_cast<std::int32_t>(answer_end - first + offset);
        }
      }
      out.features.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace polyhal
