#pragma once
/// @file squad_predictions.hpp
/// From a model's start and end logits to SQuAD answers, as the reference's
/// write_predictions (run_squad.py): the n-best spans over every window of
/// a question (each token only from its max-context window, at most
/// max_answer_length tokens), their text mapped back to the original words
/// (get_final_text), probabilities by softmax over the n-best, and for v2.0
/// the null answer against a score-difference threshold.
#include <cstdint>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/squad_data.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

struct SquadPredictionSettings {
  std::int64_t n_best = 20;
  std::int64_t max_answer_length = 30;
  bool version_2 = false;  ///< consider the null answer ([CLS])
  double null_score_diff_threshold = 0.0;
  bool lower_case = true;  ///< as the tokenizer, for mapping text back
};

struct SquadCandidate {
  std::string text;
  double probability = 0, start_logit = 0, end_logit = 0;
  /// The context words (split on whitespace) the text lies in, first and
  /// last; -1 for the null answer.
  std::int64_t first_word = -1, last_word = -1;
};

struct SquadAnswerPrediction {
  std::string id;
  std::string text;  ///< "" for no answer (v2.0)
  std::vector<SquadCandidate> nbest;
  double null_score_diff = 0;  ///< v2.0: null score minus the best span's
};

/// `start_logits[f]` and `end_logits[f]` belong to `features.features[f]`
/// (max_seq_length each). Throws std::invalid_argument on mismatched sizes.
std::vector<SquadAnswerPrediction> predict_squad_answers(
    const SquadFile& squad, const SquadFeatures& features,
    const std::vector<std::vector<float>>& start_logits,
    const std::vector<std::vector<float>>& end_logits, const Tokenizer& tokenizer,
    const SquadPredictionSettings& settings);

/// The reference's get_final_text: the span of `original` (whitespace words
/// joined) whose tokenisation is `predicted` (WordPiece tokens joined, "##"
/// removed); `original` itself when they cannot be aligned.
std::string squad_final_text(const std::string& predicted, const std::string& original,
                             const Tokenizer& tokenizer);

}  // namespace polyhal
