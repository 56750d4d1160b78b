// Every route's body: a field the route does not read is a 400 naming it
// (a client's option is never silently dropped), and "dimensions" and
// "prompt_name" are read where text-embeddings-inference and OpenAI take them;
// the quantised encodings, left truncation, the Inference API's "parameters"
// and the root route as serve_api.hpp documents them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
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

TEST(ServeApiFields, QuantisedEncodingsAreTheDocumentedFunctions) {
  // Nine dimensions, the largest magnitude 1: int8 is round(127 x).
  const std::vector<std::vector<float>> e{
      {0.5f, -1.0f, 0.25f, 0.0f, 0.1f, -0.1f, 0.3f, 0.9f, 0.2f}};
  const auto encoded = [&](const char* format) {
    const ApiLimits limits{32, 9};
    const auto request = parse_openai_embeddings(
        std::string(R"({"input": "a", "encoding_format": ")") + format + "\"}", limits);
    return nlohmann::json::parse(
        openai_embeddings_answer(e, request.encoding, "m", 1))["data"][0]["embedding"];
  };
  EXPECT_EQ(encoded("int8"), nlohmann::json({64, -127, 32, 0, 13, -13, 38, 114, 25}));
  EXPECT_EQ(encoded("uint8"), nlohmann::json({192, 1, 160, 128, 141, 115, 166, 242, 153}));
  // Signs 1 0 1 0 1 0 1 1 | 1: the first dimension in the high bit.
  EXPECT_EQ(encoded("ubinary"), nlohmann::json({0b10101011, 0b10000000}));
  EXPECT_EQ(encoded("binary"), nlohmann::json({0b10101011 - 128, 0}));
  EXPECT_TRUE(encoded("float").is_array());
  EXPECT_TRUE(encoded("base64").is_string());
  EXPECT_NE(test::api_refusal([] {
              parse_openai_embeddings(R"({"input": "a", "encoding_format": "int4"})", {32, 9});
            }).find("\"ubinary\""),
            std::string::npos);
}

TEST(ServeApiFields, LeftTruncationIsReadForSingleTextsAndRefusedForPairs) {
  const ApiLimits limits{32, 384};
  EXPECT_TRUE(
      parse_tei_embed(R"({"inputs": "a", "truncation_direction": "Left"})", limits).truncate_left);
  EXPECT_TRUE(parse_tei_embed_all(R"({"inputs": "a", "truncation_direction": "left"})", limits)
                  .truncate_left);
  EXPECT_FALSE(
      parse_tei_embed(R"({"inputs": "a", "truncation_direction": "Right"})", limits).truncate_left);
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_predict(R"({"inputs": ["a", "b"], "truncation_direction": "Left"})",
                                limits);
            }).find("pairs are cut longest first from the right"),
            std::string::npos);
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_embed_all(R"({"inputs": "a", "normalize": true})", limits);
            }).find("is not a field /embed_all reads"),
            std::string::npos);
}

TEST(ServeApiFields, InferenceApiParametersAreRead) {
  const ApiLimits limits{32, 384};
  const auto predict = parse_tei_predict(
      R"({"inputs": "a", "parameters": {"function_to_apply": "sigmoid", "top_k": 2}})", limits);
  EXPECT_EQ(predict.independent, std::optional<bool>(true));
  EXPECT_EQ(predict.top_k, 2);
  EXPECT_TRUE(
      parse_tei_predict(R"({"inputs": "a", "parameters": {"function_to_apply": "none"}})", limits)
          .function_none);
  EXPECT_FALSE(parse_tei_predict(R"({"inputs": "a", "parameters": {}})", limits).independent);
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_predict(R"({"inputs": "a", "parameters": {"function_to_apply": "relu"}})",
                                limits);
            }).find("function_to_apply"),
            std::string::npos);
  const auto top =
      nlohmann::json::parse(tei_predict_answer({{0.1f, 0.7f, 0.2f}}, {"a", "b", "c"}, false, 1));
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0]["label"], "b");

  const auto similarity = parse_tei_similarity(
      R"({"inputs": {"source_sentence": "a", "sentences": ["b"]},
          "parameters": {"truncate": false, "truncation_direction": "Left"}})",
      limits);
  EXPECT_EQ(similarity.truncate, std::optional<bool>(false));
  EXPECT_TRUE(similarity.truncate_left);
  EXPECT_NE(test::api_refusal([&] {
              parse_tei_similarity(R"({"inputs": {"source_sentence": "a", "sentences": ["b"]},
                                       "parameters": {}, "truncate": true})",
                                   limits);
            }).find("none of them beside it"),
            std::string::npos);
}

TEST(ServeApiFields, TheRootRouteFollowsTheBody) {
  EXPECT_EQ(tei_root_route(R"({"inputs": "a"})", false), "/embed");
  EXPECT_EQ(tei_root_route(R"({"inputs": {"source_sentence": "a", "sentences": ["b"]}})", false),
            "/similarity");
  EXPECT_EQ(tei_root_route(R"({"query": "q", "texts": ["a"]})", true), "/rerank");
  EXPECT_EQ(tei_root_route(R"({"inputs": ["a", "b"]})", true), "/predict");
  EXPECT_EQ(tei_root_route("not json", false), "/embed");  // whose parser says why
}

}  // namespace
}  // namespace polyhal
