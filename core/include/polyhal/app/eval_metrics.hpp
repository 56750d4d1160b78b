#pragma once
/// @file eval_metrics.hpp
/// Evaluation metrics with their official definitions: SQuAD v1.1 / v2.0
/// exact match and F1 (the official evaluate-v2.0.py), and the GLUE
/// metrics (accuracy, F1, Matthews correlation, Pearson and Spearman
/// correlation, as scikit-learn and SciPy compute them).
#include <cstdint>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// SQuAD's answer normalisation: lower-case (Unicode), remove ASCII
/// punctuation (Python's string.punctuation), remove the articles a, an, the
/// as whole words (regex \b(a|an|the)\b), collapse whitespace.
std::string normalize_squad_answer(const std::string& text);
/// The normalised answer's whitespace tokens.
std::vector<std::string> squad_answer_tokens(const std::string& text);
/// 1 when the normalised answers are equal, else 0.
double squad_exact_match(const std::string& prediction, const std::string& gold);
/// Token-level F1 of the normalised answers (multiset overlap); when either
/// has no tokens, 1 if both have none, else 0.
double squad_f1(const std::string& prediction, const std::string& gold);

/// One question: its prediction and its gold answers (empty for an
/// unanswerable SQuAD v2.0 question, which then expects an empty prediction).
struct SquadPrediction {
  std::string id;
  std::string prediction;
  std::vector<std::string> gold_answers;
};

/// SQuAD's scores in percent, the maximum over gold answers per question;
/// the HasAns / NoAns split of v2.0 (counts 0 when there are none).
struct SquadScores {
  double exact = 0, f1 = 0;
  std::int64_t total = 0;
  double has_answer_exact = 0, has_answer_f1 = 0;
  std::int64_t has_answer_total = 0;
  double no_answer_exact = 0, no_answer_f1 = 0;
  std::int64_t no_answer_total = 0;
};
SquadScores score_squad(const std::vector<SquadPrediction>& predictions);

/// Share of equal labels, in [0, 1]. Throws std::invalid_argument when the
/// sizes differ or there are none (also for the metrics below).
double accuracy(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& gold);
/// Binary F1 of class `positive` (scikit-learn's f1_score, 0 when there
/// are no true positives).
double binary_f1(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& gold,
                 std::int64_t positive = 1);
/// Matthews correlation coefficient of two binary labelings (CoLA), 0 when
/// undefined (a constant labeling), as scikit-learn.
double matthews_correlation(const std::vector<std::int64_t>& predicted,
                            const std::vector<std::int64_t>& gold);
/// Pearson correlation (STS-B); NaN when either side is constant.
double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y);
/// Spearman rank correlation, ties ranked by their average (SciPy's spearmanr).
double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace polyhal
