// Hardening, round 4 (issue 72): each fault the fourth hostile probe found,
// fed as input, with the answer it must give. The live-server items are in
// tests/serve_hardening_test.py. Items not here are not fixed yet.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "polyhal/app/json_input.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/serve_api.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

/// The body's 400 message, or "" when the parser accepted it.
std::string refusal(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.what();
  }
  return "";
}

// Item 1: 300,000 levels of brackets in any key overflowed an I/O thread's
// stack when the 400 message dumped the value. Every body is read through
// the depth-capped reader, and no message prints more than an excerpt.
TEST(HardeningRound4, DeepBodiesAreRefusedByEveryApiParser) {
  const std::string deep = nested(300000);
  const ApiLimits limits{32, 8};
  struct Case {
    const char* key;
    std::function<void(const std::string&)> parse;
    std::string rest;  ///< the body's other keys, valid
  };
  const std::vector<Case> cases = {
      {"encoding_format", [&](const std::string& b) { parse_openai_embeddings(b, limits); },
       R"("input": "a")"},
      {"dimensions", [&](const std::string& b) { parse_openai_embeddings(b, limits); },
       R"("input": "a")"},
      {"truncation_direction", [&](const std::string& b) { parse_tei_embed(b, limits); },
       R"("inputs": "a")"},
      {"top_k", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q", "context": "c")"},
      {"max_answer_length", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q", "context": "c")"},
      {"context", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q")"},
      {"query", [&](const std::string& b) { parse_tei_rerank(b, limits); }, R"("texts": ["a"])"},
      {"inputs", [&](const std::string& b) { parse_tei_predict(b, limits); }, R"("x": 1)"},
  };
  for (const auto& c : cases) {
    const std::string body = "{" + c.rest + ", \"" + c.key + "\": " + deep + "}";
    const std::string message = refusal([&] { c.parse(body); });
    EXPECT_NE(message.find("the body: JSON nested deeper than 64 levels"), std::string::npos)
        << c.key << ": " << message;
    // Shallow but wrong: the message quotes a bounded excerpt of the value.
    const std::string wide =
        "{" + c.rest + ", \"" + c.key + "\": [" + std::string(200000, '7') + "]}";
    const std::string wrong = refusal([&] { c.parse(wide); });
    EXPECT_LT(wrong.size(), 400u) << c.key << ": " << wrong.substr(0, 400);
  }
}

TEST(HardeningRound4, AnExcerptWalksOnlyWhatItPrints) {
  // A value deeper than any reader allows, built in memory: the excerpt
  // stops with its budget instead of recursing 300,000 levels.
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 300000; ++i) deep = nlohmann::json::array({std::move(deep)});
  const std::string excerpt = json_excerpt(deep, 20);
  EXPECT_EQ(excerpt, std::string(20, '[') + "...");
  EXPECT_EQ(json_excerpt(nlohmann::json{{"a", 1}, {"b", {true, nullptr}}}),
            R"({"a":1,"b":[true,null]})");
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(500, 'a')), 10), "\"aaaaaaaaa...");
}

/// A safetensors header of `entries` F32 tensors of one element each.
std::string safetensors_header(int entries) {
  std::string header = "{";
  for (int i = 0; i < entries; ++i)
    header += fmt::format("{}\"t{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                          i == 0 ? "" : ",", i, 4 * i, 4 * i + 4);
  return header + "}";
}

// Item 7: the depth cap made parsing quadratic (nlohmann's callback parser
// rescans the enclosing container after every closed child). The work is
// counted, not timed: each entry costs the same events however many came
// before it, and no more events than the input has bytes.
TEST(HardeningRound4, CappedJsonParsingIsLinearInTheInputsSize) {
  std::vector<std::size_t> per_entry;
  for (const int entries : {1000, 4000, 16000}) {
    const std::string header = safetensors_header(entries);
    JsonReadWork work;
    const auto parsed = parse_json_input(header, "header", &work);
    EXPECT_EQ(parsed.size(), static_cast<std::size_t>(entries));
    EXPECT_LT(work.events, header.size());
    EXPECT_EQ((work.events - 2) % entries, 0u) << work.events;  // the outer object: 2 events
    per_entry.push_back((work.events - 2) / entries);
  }
  EXPECT_EQ(per_entry.front(), per_entry.back());
  EXPECT_EQ(per_entry.front(), per_entry[1]);
}

TEST(HardeningRound4, ALargeSafetensorsHeaderAndASquadFileOfEmptyObjectsReadQuickly) {
  test::TempDir dir;
  // 20,000 entries (1.4 MB of header): 18 to 34 s before, a fraction of a second now.
  const int entries = 20000;
  const std::string header = safetensors_header(entries);
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header + std::string(4 * entries, '\0');
  const auto weights = dir.write("w.safetensors", file);
  EXPECT_EQ(read_safetensors(weights).size(), static_cast<std::size_t>(entries));
  // A SQuAD file of 4 MB of {}s: refused for its shape, after one linear parse.
  std::string squad = "{\"data\": [";
  for (int i = 0; i < 2000000; ++i) squad += i == 0 ? "{}" : ",{}";
  const auto squad_file = dir.write("squad.json", squad + "]}");
  EXPECT_THROW(read_squad_json(squad_file), ConfigError);
}

}  // namespace
}  // namespace polyhal
