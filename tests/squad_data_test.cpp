// SQuAD JSON files (v1.1 and v2.0 layouts, answers checked against their
// context in code points, errors naming the JSON path), the features made
// from them, and the answers predicted back from logits.
#include <gtest/gtest.h>

#include "polyhal/app/squad_data.hpp"
#include "polyhal/app/squad_predictions.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::string error_of(const std::filesystem::path& file) {
  try {
    read_squad_json(file);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SquadData, ReadsV2WithUnanswerableAndUnicodeOffsets) {
  test::TempDir dir;
  // "café" is four code points and five bytes: "Denver" starts at code point 13.
  const auto file = dir.write("dev.json", R"({"version": "v2.0", "data": [{"title": "T",
    "paragraphs": [{"context": "In the café, Denver won.",
      "qas": [
        {"id": "q1", "question": "Who won?", "is_impossible": false,
         "answers": [{"text": "Denver", "answer_start": 13}, {"text": "Denver won", "answer_start": 13}]},
        {"id": "q2", "question": "Who lost?", "is_impossible": true, "answers": [],
         "plausible_answers": [{"text": "Denver", "answer_start": 13}]},
        {"id": "q3", "question": "Where?", "answers": [{"text": "café", "answer_start": 7},
                                                       {"text": "caf", "answer_start": 0}]},
        {"id": "q4", "question": "Misplaced?", "answers": [{"text": "Boston", "answer_start": 3}]}
      ]}]}]})");
  const SquadFile squad = read_squad_json(file);
  EXPECT_EQ(squad.version, "v2.0");
  ASSERT_EQ(squad.contexts.size(), 1u);
  ASSERT_EQ(squad.questions.size(), 3u);  // q4 lost its only answer
  EXPECT_EQ(squad.questions[0].answers.size(), 2u);
  EXPECT_TRUE(squad.questions[1].impossible);
  EXPECT_TRUE(squad.questions[1].answers.empty());
  EXPECT_EQ(squad.questions[2].answers.size(), 1u);  // "caf" at 0 is misplaced
  EXPECT_EQ(squad.misplaced_answers, 2);
  EXPECT_EQ(squad.dropped_questions, 1);
  ASSERT_EQ(squad.misplaced_examples.size(), 2u);
  EXPECT_NE(squad.misplaced_examples[0].find(
                "data[0].paragraphs[0].qas[2].answers[1]: \"caf\" is not at offset 0"),
            std::string::npos)
      << squad.misplaced_examples[0];
}

TEST(SquadData, MalformedFilesNameTheJsonPath) {
  test::TempDir dir;
  EXPECT_NE(error_of(dir.write("a.json", "{\"data\": [")).find("a.json: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("b.json", R"({"data": [{"paragraphs": [{"context": "x",
      "qas": [{"id": "q", "answers": []}]}]}]})"))
                .find("b.json: data[0].paragraphs[0].qas[0]: missing key 'question'"),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("c.json", R"({"data": [{"paragraphs": [{"context": "x",
      "qas": [{"id": "q", "question": "?", "answers": [{"text": "x", "answer_start": -1}]}]}]}]})"))
                .find("c.json: data[0].paragraphs[0].qas[0].answers[0].answer_start: expected a "
                      "non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("d.json", R"({"data": [{"paragraphs": [{"context": "x",
      "qas": [{"id": "q", "question": "?", "answers": []}, {"id": "q", "question": "?",
      "answers": []}]}]}]})"))
                .find("qas[1].id: duplicate question id \"q\""),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("e.json", "[1, 2]")).find("e.json: $: expected an object"),
            std::string::npos);
  std::string spaces_then_object(100, ' ');
  spaces_then_object += "{}";
  const auto big = dir.write("f.json", spaces_then_object);
  EXPECT_THROW(read_squad_json(big, 50), ConfigError);
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

/// "In the cafe, Denver won." with a vocabulary that splits Denver into
/// den ##ver; question "Who won?", answer "Denver" at code point 13.
struct TinySquad {
  test::TempDir dir;
  std::unique_ptr<Tokenizer> opened = open_tokenizer(
      {dir.write(
           "vocab.txt",
           "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nin\nthe\ncafe\n,\nden\n##ver\nwon\n.\nwho\n?\n"),
       TokenizerOptions{true}});
  const Tokenizer& tokenizer = *opened;
  SquadFile squad = read_squad_json(dir.write("s.json", R"({"data": [{"paragraphs": [{
      "context": "In the cafe, Denver won.",
      "qas": [{"id": "a", "question": "Who won?", "answers": [{"text": "Denver", "answer_start": 13}]},
              {"id": "b", "question": "Who won?", "is_impossible": true, "answers": []}]}]}]})"));
};

TEST(SquadFeatures, TokensSegmentsAndAnswerSpanAsTheReference) {
  const TinySquad t;
  const auto out = make_squad_features(t.squad, t.tokenizer, {16, 128, 64, true});
  ASSERT_EQ(out.features.size(), 2u);
  const SquadFeature& f = out.features[0];
  const std::vector<std::string> tokens{"[CLS]", "who", "won", "?",     "[SEP]", "in", "the",
                                        "cafe",  ",",   "den", "##ver", "won",   ".",  "[SEP]"};
  EXPECT_EQ(f.tokens, tokens);
  ASSERT_EQ(f.input_ids.size(), 16u);
  EXPECT_EQ(f.input_ids[9], 9);   // den
  EXPECT_EQ(f.input_ids[15], 0);  // padding
  EXPECT_EQ(f.token_type_ids[4], 0);
  EXPECT_EQ(f.token_type_ids[5], 1);
  EXPECT_EQ(f.attention_mask[13], 1);
  EXPECT_EQ(f.attention_mask[14], 0);
  EXPECT_EQ(f.start_position, 9);  // "den"
  EXPECT_EQ(f.end_position, 10);   // "##ver"
  EXPECT_EQ(f.token_to_word.at(9), 3);
  EXPECT_EQ(f.token_to_word.at(8), 2);  // "," belongs to "cafe,"
  EXPECT_EQ(out.context_words[0][3], "Denver");
  // The unanswerable question points at [CLS].
  EXPECT_EQ(out.features[1].start_position, 0);
  EXPECT_EQ(out.features[1].end_position, 0);
}

TEST(SquadFeatures, DocStrideWindowsAndMaxContext) {
  const TinySquad t;
  // 11 tokens: 5 for the context per window, windows start at tokens 0, 2, 4.
  const auto out = make_squad_features(t.squad, t.tokenizer, {11, 2, 64, true});
  ASSERT_EQ(out.features.size(), 6u);            // three windows per question
  EXPECT_EQ(out.features[0].start_position, 0);  // the answer runs past window 0
  EXPECT_EQ(out.features[1].start_position, 7);
  EXPECT_EQ(out.features[1].end_position, 8);
  EXPECT_EQ(out.features[2].start_position, 5);
  EXPECT_EQ(out.features[2].end_position, 6);
  // "den" (context token 4) has the most context in the middle window.
  EXPECT_FALSE(out.features[0].max_context[9]);
  EXPECT_TRUE(out.features[1].max_context[7]);
  EXPECT_FALSE(out.features[2].max_context[5]);
  EXPECT_THROW(make_squad_features(t.squad, t.tokenizer, {6, 2, 64, true}), ConfigError);
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

/// Logits of one feature: `high` at the given start and end, low elsewhere.
std::pair<std::vector<float>, std::vector<float>> peaked(std::size_t length, std::size_t start,
                                                         std::size_t end, float high) {
  std::vector<float> starts(length, -5.0f), ends(length, -5.0f);
  starts[start] = high;
  ends[end] = high;
  return {starts, ends};
}

TEST(SquadPredictions, BestSpanMappedBackToTheOriginalWords) {
  const TinySquad t;
  const auto features = make_squad_features(t.squad, t.tokenizer, {16, 128, 64, false});
  ASSERT_EQ(features.features.size(), 2u);
  auto [s0, e0] = peaked(16, 9, 10, 4.0f);  // "den ##ver" -> "Denver"
  auto [s1, e1] = peaked(16, 7, 8, 3.0f);   // "cafe ," -> "cafe,"
  const auto predictions = predict_squad_answers(t.squad, features, {s0, s1}, {e0, e1}, t.tokenizer,
                                                 SquadPredictionSettings{});
  ASSERT_EQ(predictions.size(), 2u);
  EXPECT_EQ(predictions[0].id, "a");
  EXPECT_EQ(predictions[0].text, "Denver");
  EXPECT_EQ(predictions[1].text, "cafe,");
  ASSERT_GE(predictions[0].nbest.size(), 2u);
  double total = 0;
  for (const auto& c : predictions[0].nbest) total += c.probability;
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_GT(predictions[0].nbest[0].probability, predictions[0].nbest[1].probability);
  // A span past max_answer_length is never proposed.
  SquadPredictionSettings short_answers;
  short_answers.max_answer_length = 1;
  const auto one =
      predict_squad_answers(t.squad, features, {s0, s1}, {e0, e1}, t.tokenizer, short_answers);
  EXPECT_NE(one[0].text, "Denver");
}

TEST(SquadPredictions, Version2AnswersNullWhenItBeatsTheBestSpanByTheThreshold) {
  const TinySquad t;
  const auto features = make_squad_features(t.squad, t.tokenizer, {16, 128, 64, false});
  auto [s0, e0] = peaked(16, 9, 10, 4.0f);
  s0[0] = e0[0] = 4.5f;  // null score 9 against the span's 8
  SquadPredictionSettings v2;
  v2.version_2 = true;
  const auto nulled = predict_squad_answers(t.squad, features, {s0, s0}, {e0, e0}, t.tokenizer, v2);
  EXPECT_EQ(nulled[0].text, "");
  EXPECT_NEAR(nulled[0].null_score_diff, 1.0, 1e-6);
  v2.null_score_diff_threshold = 1.5;  // a span within 1.5 of the null is kept
  const auto kept = predict_squad_answers(t.squad, features, {s0, s0}, {e0, e0}, t.tokenizer, v2);
  EXPECT_EQ(kept[0].text, "Denver");
}

TEST(SquadPredictions, FinalTextFallsBackToTheOriginalWhenItCannotAlign) {
  const TinySquad t;
  EXPECT_EQ(squad_final_text("denver", "Denver's", t.tokenizer), "Denver");
  EXPECT_EQ(squad_final_text("boston", "Denver", t.tokenizer), "Denver");
}

}  // namespace
}  // namespace polyhal
