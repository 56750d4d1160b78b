// SQuAD and GLUE metrics on hand-made cases whose values follow from the
// official definitions (evaluate-v2.0.py, scikit-learn, SciPy).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "polyhal/app/eval_metrics.hpp"

namespace polyhal {
namespace {

TEST(SquadMetrics, NormalisationLowersAndDropsPunctuationArticlesAndSpaces) {
  EXPECT_EQ(normalize_squad_answer("The Quick,  brown fox!"), "quick brown fox");
  EXPECT_EQ(normalize_squad_answer("an apple a day"), "apple day");
  EXPECT_EQ(normalize_squad_answer("Theory of a-the"), "theory of athe");  // only whole words
  EXPECT_EQ(normalize_squad_answer("\xC3\x89"
                                   "COLE"),
            "\xC3\xA9"
            "cole");  // Unicode lower-case
  // Non-ASCII punctuation stays, and still bounds an article.
  EXPECT_EQ(normalize_squad_answer("\xC2\xABthe\xC2\xBB end"), "\xC2\xAB \xC2\xBB end");
  EXPECT_EQ(normalize_squad_answer("  "), "");
}

TEST(SquadMetrics, ExactMatchAndF1) {
  EXPECT_EQ(squad_exact_match("The cat.", "cat"), 1.0);
  EXPECT_EQ(squad_exact_match("cats", "cat"), 0.0);
  EXPECT_NEAR(squad_f1("the cat sat", "a cat sat on the mat"), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(squad_f1("cat cat", "cat"), 2.0 / 3.0, 1e-12);  // tokens counted as a multiset
  EXPECT_EQ(squad_f1("", "cat"), 0.0);
  EXPECT_EQ(squad_f1("", ""), 1.0);
  EXPECT_EQ(squad_f1("dog", "cat"), 0.0);
}

TEST(SquadMetrics, ScoresTakeTheBestGoldAnswerAndSplitUnanswerable) {
  const std::vector<SquadPrediction> predictions{
      {"q1", "Denver Broncos", {"Denver Broncos", "the Broncos"}},  // exact
      {"q2", "Broncos", {"Denver Broncos", "Carolina"}},            // F1 2/3 against the first
      {"q3", "", {}},                                               // unanswerable, abstained
      {"q4", "Paris", {}},                                          // unanswerable, answered
  };
  const SquadScores s = score_squad(predictions);
  EXPECT_EQ(s.total, 4);
  EXPECT_EQ(s.has_answer_total, 2);
  EXPECT_EQ(s.no_answer_total, 2);
  EXPECT_NEAR(s.exact, 100.0 * 2 / 4, 1e-9);
  EXPECT_NEAR(s.f1, 100.0 * (1 + 2.0 / 3.0 + 1 + 0) / 4, 1e-9);
  EXPECT_NEAR(s.has_answer_exact, 50.0, 1e-9);
  EXPECT_NEAR(s.has_answer_f1, 100.0 * (1 + 2.0 / 3.0) / 2, 1e-9);
  EXPECT_NEAR(s.no_answer_exact, 50.0, 1e-9);
  EXPECT_NEAR(s.no_answer_f1, 50.0, 1e-9);
}

TEST(GlueMetrics, AccuracyF1AndMatthews) {
  const std::vector<std::int64_t> predicted{1, 0, 1, 1}, gold{1, 1, 1, 0};
  EXPECT_DOUBLE_EQ(accuracy(predicted, gold), 0.5);
  EXPECT_NEAR(binary_f1(predicted, gold), 4.0 / 6.0, 1e-12);  // tp 2, fp 1, fn 1
  EXPECT_NEAR(matthews_correlation(predicted, gold), -1.0 / 3.0, 1e-12);
  EXPECT_EQ(matthews_correlation({1, 1, 1}, {1, 0, 1}), 0.0);  // constant: undefined -> 0
  EXPECT_EQ(binary_f1({0, 0}, {1, 1}), 0.0);
  EXPECT_THROW(accuracy({1}, {1, 0}), std::invalid_argument);
  EXPECT_THROW(accuracy({}, {}), std::invalid_argument);
}

TEST(GlueMetrics, PearsonAndSpearmanWithTies) {
  EXPECT_NEAR(pearson_correlation({1, 2, 3}, {2, 4, 6}), 1.0, 1e-12);
  EXPECT_NEAR(pearson_correlation({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_TRUE(std::isnan(pearson_correlation({1, 1, 1}, {1, 2, 3})));
  // SciPy: spearmanr([1, 2, 2, 3], [1, 3, 2, 4]) = 0.9486832980505138 (ties at rank 2.5).
  EXPECT_NEAR(spearman_correlation({1, 2, 2, 3}, {1, 3, 2, 4}), 0.9486832980505138, 1e-12);
}

}  // namespace
}  // namespace polyhal
