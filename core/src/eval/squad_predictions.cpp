// SQuAD post-processing, step for step as the reference's write_predictions.
#include "polyhal/app/squad_predictions.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "util/utf8.hpp"

namespace polyhal {
namespace {

/// Text without spaces, and for each kept character its index in `text`.
std::pair<std::u32string, std::vector<std::size_t>> strip_spaces(const std::u32string& text) {
  std::u32string kept;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    kept.push_back(text[i]);
    index.push_back(i);
  }
  return {kept, index};
}

/// Indices of the `n` largest values, largest first (ties: lower index first).
std::vector<std::size_t> best_indexes(const std::vector<float>& values, std::int64_t n) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  if (static_cast<std::int64_t>(order.size()) > n) order.resize(static_cast<std::size_t>(n));
  return order;
}

std::string joined(const std::vector<std::string>& words, std::size_t first, std::size_t last) {
  std::string out;
  for (std::size_t k = first; k <= last; ++k) out += (k > first ? " " : "") + words[k];
  return out;
}

}  // namespace

std::string squad_final_text(const std::string& predicted, const std::string& original,
                             const Tokenizer& tokenizer) {
  std::string tokenized;
  for (const auto& t : tokenizer.words(original)) tokenized += (tokenized.empty() ? "" : " ") + t;
  const std::u32string tok = utf8::decode(tokenized), pred = utf8::decode(predicted),
                       orig = utf8::decode(original);
  const std::size_t start = tok.find(pred);
  if (pred.empty() || start == std::u32string::npos) return original;
  const std::size_t end = start + pred.size() - 1;
  const auto [orig_ns, orig_map] = strip_spaces(orig);
  const auto [tok_ns, tok_map] = strip_spaces(tok);
  if (orig_ns.size() != tok_ns.size()) return original;
  std::map<std::size_t, std::size_t> tok_to_ns;
  for (std::size_t k = 0; k < tok_map.size(); ++k) tok_to_ns[tok_map[k]] = k;
  const auto s = tok_to_ns.find(start), e = tok_to_ns.find(end);
  if (s == tok_to_ns.end() || e == tok_to_ns.end()) return original;
  const std::size_t orig_start = orig_map[s->second], orig_end = orig_map[e->second];
  return utf8::encode(orig.substr(orig_start, orig_end - orig_start + 1));
}

namespace {

/// The feature's tokens start..end joined as the reference's tok_text:
/// spaces between, WordPiece continuations (" ##", "##") joined back.
std::string span_text(const SquadFeature& feature, std::int64_t start, std::int64_t end) {
  std::string pieces;
  for (std::int64_t k = start; k <= end; ++k)
    pieces += (k > start ? " " : "") + feature.tokens[static_cast<std::size_t>(k)];
  std::string merged;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces.compare(i, 3, " ##") == 0) {
      i += 2;
      continue;
    }
    if (pieces.compare(i, 2, "##") == 0) {
      i += 1;
      continue;
    }
    merged += pieces[i];
  }
  return merged;
}

/// Each candidate's probability: the softmax of start + end logits over the n-best.
void set_probabilities(std::vector<SquadCandidate>& nbest) {
  double largest = -INFINITY, total = 0;
  for (const auto& c : nbest) largest = std::max(largest, c.start_logit + c.end_logit);
  for (auto& c : nbest) {
    c.probability = std::exp(c.start_logit + c.end_logit - largest);
    total += c.probability;
  }
  for (auto& c : nbest) c.probability /= total;
}

}  // namespace

std::vector<SquadAnswerPrediction> predict_squad_answers(
    const SquadFile& squad, const SquadFeatures& features,
    const std::vector<std::vector<float>>& start_logits,
    const std::vector<std::vector<float>>& end_logits, const Tokenizer& tokenizer,
    const SquadPredictionSettings& settings) {
  if (start_logits.size() != features.features.size() ||
      end_logits.size() != features.features.size()) {
    throw std::invalid_argument("predict_squad_answers: one pair of logits per feature");
  }
  std::map<std::size_t, std::vector<std::size_t>> features_of;
  for (std::size_t f = 0; f < features.features.size(); ++f)
    features_of[features.features[f].question].push_back(f);
  std::vector<SquadAnswerPrediction> out;
  for (const auto& [q, indices] : features_of) {
    struct Span {
      std::size_t feature;
      std::int64_t start, end;
      double start_logit, end_logit;
    };
    std::vector<Span> spans;
    double null_score = INFINITY, null_start = 0, null_end = 0;
    std::size_t null_feature = 0;
    for (std::size_t f : indices) {
      const SquadFeature& feature = features.features[f];
      const auto& starts = start_logits[f];
      const auto& ends = end_logits[f];
      if (starts.size() != feature.input_ids.size() || ends.size() != feature.input_ids.size())
        throw std::invalid_argument("predict_squad_answers: logits of another length");
      if (settings.version_2 && starts[0] + ends[0] < null_score) {
        null_score = starts[0] + ends[0];
        null_feature = f;
        null_start = starts[0];
        null_end = ends[0];
      }
      const auto real = static_cast<std::int64_t>(feature.tokens.size());
      for (std::size_t s : best_indexes(starts, settings.n_best)) {
        for (std::size_t e : best_indexes(ends, settings.n_best)) {
          const auto start = static_cast<std::int64_t>(s), end = static_cast<std::int64_t>(e);
          if (start >= real || end >= real) continue;
          if (!feature.token_to_word.contains(start) || !feature.token_to_word.contains(end))
            continue;
          if (!feature.max_context[s] || end < start) continue;
          if (end - start + 1 > settings.max_answer_length) continue;
          spans.push_back({f, start, end, starts[s], ends[e]});
        }
      }
    }
    if (settings.version_2) spans.push_back({null_feature, 0, 0, null_start, null_end});
    std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    });
    SquadAnswerPrediction prediction;
    prediction.id = squad.questions.at(q).id;
    std::set<std::string> seen;
    for (const Span& span : spans) {
      if (static_cast<std::int64_t>(prediction.nbest.size()) >= settings.n_best) break;
      std::string text;
      if (span.start > 0) {
        const SquadFeature& feature = features.features[span.feature];
        const std::string merged = span_text(feature, span.start, span.end);
        const auto& words = features.context_words.at(squad.questions.at(q).context);
        const auto first = static_cast<std::size_t>(feature.token_to_word.at(span.start));
        const auto last = static_cast<std::size_t>(feature.token_to_word.at(span.end));
        text = squad_final_text(merged, joined(words, first, last), tokenizer);
        if (!seen.insert(text).second) continue;
        prediction.nbest.push_back({text, 0, span.start_logit, span.end_logit,
                                    static_cast<std::int64_t>(first),
                                    static_cast<std::int64_t>(last)});
        continue;
      }
      if (!seen.insert("").second) continue;
      prediction.nbest.push_back({text, 0, span.start_logit, span.end_logit});
    }
    // As the reference: the null answer is always among a v2.0 n-best, a
    // lone null gets an "empty" companion, and an empty n-best an "empty".
    if (settings.version_2 && !seen.contains(""))
      prediction.nbest.push_back({"", 0, null_start, null_end});
    if (settings.version_2 && prediction.nbest.size() == 1)
      prediction.nbest.insert(prediction.nbest.begin(), {"empty", 0, 0, 0});
    if (prediction.nbest.empty()) prediction.nbest.push_back({"empty", 0, 0, 0});
    set_probabilities(prediction.nbest);
    const SquadCandidate* best_span = nullptr;
    for (const auto& c : prediction.nbest) {
      if (!c.text.empty()) {
        best_span = &c;
        break;
      }
    }
    if (!settings.version_2) {
      prediction.text = prediction.nbest.front().text;
    } else if (best_span == nullptr) {
      prediction.text = "";
      prediction.null_score_diff = null_score;
    } else {
      prediction.null_score_diff = null_score - best_span->start_logit - best_span->end_logit;
      prediction.text =
          prediction.null_score_diff > settings.null_score_diff_threshold ? "" : best_span->text;
    }
    out.push_back(std::move(prediction));
  }
  return out;
}

}  // namespace polyhal
