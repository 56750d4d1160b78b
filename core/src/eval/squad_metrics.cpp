// SQuAD exact match and F1 as the official evaluate-v2.0.py computes them.
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "polyhal/app/eval_metrics.hpp"

namespace polyhal {
namespace {

/// Python's string.punctuation.
bool ascii_punctuation(UChar32 c) {
  return c < 128 &&
         std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find(static_cast<char>(c)) !=
             std::string_view::npos;
}

/// Python's \w for str patterns: str.isalnum() (letters L*, numbers Nd,
/// Nl, No) and the underscore.
bool word_char(UChar32 c) {
  const auto type = u_charType(c);
  return c == '_' || u_isalpha(c) || type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER ||
         type == U_OTHER_NUMBER;
}

/// Python's str.split() separators.
bool whitespace(UChar32 c) {
  return u_isUWhiteSpace(c) || (c >= 0x1c && c <= 0x1f);
}

std::vector<UChar32> code_points(const icu::UnicodeString& text) {
  std::vector<UChar32> out;
  for (int32_t i = 0; i < text.length(); i = text.moveIndex32(i, 1))
    out.push_back(text.char32At(i));
  return out;
}

}  // namespace

std::vector<std::string> squad_answer_tokens(const std::string& text) {
  icu::UnicodeString lowered = icu::UnicodeString::fromUTF8(text);
  lowered.toLower(icu::Locale::getRoot());
  std::vector<UChar32> chars;
  for (UChar32 c : code_points(lowered))
    if (!ascii_punctuation(c)) chars.push_back(c);
  // \b(a|an|the)\b -> " ": an article between non-word characters (or the ends).
  std::vector<UChar32> kept;
  for (std::size_t i = 0; i < chars.size();) {
    bool removed = false;
    if (i == 0 || !word_char(chars[i - 1])) {
      for (const std::u32string_view article : {U"the", U"an", U"a"}) {
        const std::size_t end = i + article.size();
        if (end > chars.size()) continue;
        if (!std::equal(article.begin(), article.end(), chars.begin() + static_cast<long>(i)))
          continue;
        if (end < chars.size() && word_char(chars[end])) continue;
        kept.push_back(' ');
        i = end;
        removed = true;
        break;
      }
    }
    if (!removed) kept.push_back(chars[i++]);
  }
  std::vector<std::string> tokens;
  icu::UnicodeString token;
  const auto flush = [&] {
    if (token.isEmpty()) return;
    std::string utf8;
    token.toUTF8String(utf8);
    tokens.push_back(std::move(utf8));
    token.remove();
  };
  for (UChar32 c : kept) {
    if (whitespace(c)) {
      flush();
    } else {
      token.append(c);
    }
  }
  flush();
  return tokens;
}

std::string normalize_squad_answer(const std::string& text) {
  std::string out;
  for (const auto& token : squad_answer_tokens(text)) {
    if (!out.empty()) out += ' ';
    out += token;
  }
  return out;
}

double squad_exact_match(const std::string& prediction, const std::string& gold) {
  return normalize_squad_answer(prediction) == normalize_squad_answer(gold) ? 1.0 : 0.0;
}

double squad_f1(const std::string& prediction, const std::string& gold) {
  const auto predicted = squad_answer_tokens(prediction), expected = squad_answer_tokens(gold);
  if (predicted.empty() || expected.empty()) return predicted == expected ? 1.0 : 0.0;
  std::map<std::string, std::int64_t> counts;
  for (const auto& t : expected) ++counts[t];
  std::int64_t same = 0;
  for (const auto& t : predicted) {
    if (auto it = counts.find(t); it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(predicted.size());
  const double recall = static_cast<double>(same) / static_cast<double>(expected.size());
  return 2 * precision * recall / (precision + recall);
}

SquadScores score_squad(const std::vector<SquadPrediction>& predictions) {
  SquadScores s;
  for (const auto& p : predictions) {
    // An unanswerable question's only gold answer is the empty string.
    const std::vector<std::string> golds =
        p.gold_answers.empty() ? std::vector<std::string>{""} : p.gold_answers;
    double exact = 0, f1 = 0;
    for (const auto& gold : golds) {
      exact = std::max(exact, squad_exact_match(p.prediction, gold));
      f1 = std::max(f1, squad_f1(p.prediction, gold));
    }
    s.exact += exact;
    s.f1 += f1;
    ++s.total;
    if (p.gold_answers.empty()) {
      s.no_answer_exact += exact;
      s.no_answer_f1 += f1;
      ++s.no_answer_total;
    } else {
      s.has_answer_exact += exact;
      s.has_answer_f1 += f1;
      ++s.has_answer_total;
    }
  }
  const auto percent = [](double sum, std::int64_t n) {
    return n == 0 ? 0.0 : 100.0 * sum / static_cast<double>(n);
  };
  s.exact = percent(s.exact, s.total);
  s.f1 = percent(s.f1, s.total);
  s.has_answer_exact = percent(s.has_answer_exact, s.has_answer_total);
  s.has_answer_f1 = percent(s.has_answer_f1, s.has_answer_total);
  s.no_answer_exact = percent(s.no_answer_exact, s.no_answer_total);
  s.no_answer_f1 = percent(s.no_answer_f1, s.no_answer_total);
  return s;
}

}  // namespace polyhal
