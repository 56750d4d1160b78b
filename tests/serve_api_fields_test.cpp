// Every route's body: a field the route does not read is a 400 naming it
// (a client's option is never silently dropped), and "dimensions" and
// "prompt_name" are read where text-embeddings-inference and OpenAI take them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "polyhal/app/serve_api.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

TEST(ServeApiFields, EveryRouteNamesAFieldItDoesNotRead) {
  const ApiLimits limits{32, 384};
  const struct {
    const char* route;
    std::function<void(const std::string&)> parse;
    std::string body;
  } cases[] = {
      {"/v1/embeddings", [&](const std::string& b) { parse_openai_embeddings(b, limits); },
       R"({"input": "a", "encoding-format": "float"})"},
      {"/embed", [&](const std::string& b) { parse_tei_embed(b, limits); },
       R"({"inputs": "a", "prompt": "query: "})"},
      {"/predict", [&](const std::string& b) { parse_tei_predict(b, limits); },
       R"({"inputs": "a", "top_k": 2})"},
      {"/rerank", [&](const std::string& b) { parse_tei_rerank(b, limits); },
       R"({"query": "a", "texts": ["b"], "top_n": 1})"},
      {"/v1/question-answering", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"({"question": "q", "context": "c", "doc_stride": 64})"},
  };
  for (const auto& c : cases) {
    const std::string message = test::api_refusal([&] { c.parse(c.body); });
    EXPECT_NE(message.find(std::string("is not a field ") + c.route + " reads (it reads: "),
              std::string::npos)
        << c.route << ": " << message;
  }
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_embed(R"({"inputs": "a", "prompt": "q"})", limits);
            }).find(R"("prompt" is not a field /embed reads)"),
            std::string::npos);
}

TEST(ServeApiFields, DimensionsAndPromptNameAreRead) {
  const ApiLimits limits{32, 384};
  EXPECT_EQ(parse_openai_embeddings(R"({"input": "a", "dimensions": 64})", limits).dimensions, 64);
  const EmbedRequest tei =
      parse_tei_embed(R"({"inputs": "a", "dimensions": 128, "prompt_name": "query"})", limits);
  EXPECT_EQ(tei.dimensions, 128);
  EXPECT_EQ(tei.prompt_name, "query");
  EXPECT_EQ(parse_tei_embed(R"({"inputs": "a"})", limits).dimensions, 0);
  for (const char* bad :
       {R"({"input": "a", "dimensions": 0})", R"({"input": "a", "dimensions": 385})",
        R"({"input": "a", "dimensions": "64"})"})
    EXPECT_NE(test::api_refusal([&] {
                parse_openai_embeddings(bad, limits);
              }).find("expected 1 to 384 (this model's size)"),
              std::string::npos)
        << bad;
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_embed(R"({"inputs": "a", "prompt_name": 3})", limits);
            }).find("'prompt_name' is 3"),
            std::string::npos);
}

TEST(ServeApiFields, CohereShapedRerankIsReadAndAnswered) {
  const ApiLimits limits{32, 1};
  const RerankRequest request = parse_tei_rerank(
      R"({"query": "q", "documents": ["a", {"text": "b"}, "c"], "top_n": 2,
          "return_documents": true})",
      limits);
  EXPECT_TRUE(request.cohere);
  EXPECT_EQ(request.texts, (std::vector<std::string>{"a", "b", "c"}));
  const auto answer =
      nlohmann::json::parse(rerank_answer({0.1f, 0.9f, 0.5f}, request, "served", 12));
  EXPECT_EQ(answer.at("model"), "served");
  ASSERT_EQ(answer.at("results").size(), 2u);
  EXPECT_EQ(answer.at("results")[0].at("index"), 1);
  EXPECT_EQ(answer.at("results")[0].at("document").at("text"), "b");
  EXPECT_EQ(answer.at("results")[1].at("index"), 2);
  EXPECT_EQ(answer.at("usage").at("total_tokens"), 12);
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_rerank(R"({"query": "q", "documents": ["a"], "texts": ["b"]})", limits);
            }).find(R"("texts" is not a field /rerank (Cohere's shape)"),
            std::string::npos);
}

}  // namespace
}  // namespace polyhal
