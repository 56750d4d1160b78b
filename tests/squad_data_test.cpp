// SQuAD JSON files: v1.1 and v2.0 layouts, answers checked against their
// context (offsets in code points), and errors that name the JSON path.
#include <gtest/gtest.h>

#include "polyhal/error.hpp"
#include "polyhal/squad_data.hpp"
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
  const auto big = dir.write("f.json", std::string(100, ' ') + "{}");
  EXPECT_THROW(read_squad_json(big, 50), ConfigError);
}

}  // namespace
}  // namespace polyhal
