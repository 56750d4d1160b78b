// polyhal serve's request bodies (serve_api.hpp): any bytes as each API's
// request (OpenAI embeddings, text-embeddings-inference's /embed, /predict,
// /rerank (and Cohere's shape), /tokenize, /decode, /similarity, /embed_all,
// /embed_sparse, the root's routing and the "model" a request names,
// question answering);
// a parsed request's answer is written too.
#include <cstdint>
#include <string_view>

#include "polyhal/app/serve_api.hpp"

namespace {

void embeddings(std::string_view body, const polyhal::ApiLimits& limits, bool tei) {
  const auto request =
      tei ? polyhal::parse_tei_embed(body, limits) : polyhal::parse_openai_embeddings(body, limits);
  std::vector<std::vector<float>> out(request.inputs.size(), std::vector<float>(8, 0.5f));
  (void)polyhal::openai_embeddings_answer(out, request.encoding, request.model, 1);
  (void)polyhal::tei_error_body(400, request.model);
}

void classification(std::string_view body, const polyhal::ApiLimits& limits) {
  const auto predict = polyhal::parse_tei_predict(body, limits);
  std::vector<std::vector<float>> scores;
  for (std::size_t i = 0; i < predict.inputs.size(); ++i)
    scores.push_back(polyhal::label_scores(std::vector<float>{0.5f, -1.0f, 2.0f}, i % 2 == 0,
                                           predict.raw_scores));
  (void)polyhal::tei_predict_answer(scores, {"a", "b", "c"}, predict.batch);
}

void rerank(std::string_view body, const polyhal::ApiLimits& limits) {
  const auto request = polyhal::parse_tei_rerank(body, limits);
  (void)polyhal::rerank_answer(std::vector<float>(request.texts.size(), 0.25f), request, "m", 3);
}

void tokens(std::string_view body, const polyhal::ApiLimits& limits) {
  (void)polyhal::parse_tei_tokenize(body, limits);
  (void)polyhal::parse_tei_decode(body, limits, 1000);
  (void)polyhal::parse_tei_similarity(body, limits);
}

void token_states(std::string_view body, const polyhal::ApiLimits& limits) {
  (void)polyhal::requested_model(body);
  (void)polyhal::tei_root_route(body, true);
  (void)polyhal::tei_root_route(body, false);
  const auto request = polyhal::parse_tei_embed_all(body, limits);
  std::vector<std::vector<float>> out(request.inputs.size(), std::vector<float>(3 * 8, 0.25f));
  (void)polyhal::tei_embed_all_answer(out, 8);
  (void)polyhal::parse_tei_embed_sparse(body, limits);
  if (!out.empty()) out.front()[3] = 0.0f;
  (void)polyhal::tei_embed_sparse_answer(out);
}

void questions(std::string_view body, const polyhal::ApiLimits& limits) {
  const auto request = polyhal::parse_question_answering(body, limits);
  std::vector<std::vector<polyhal::ServedAnswer>> answers(request.questions.size());
  if (!answers.empty()) answers.front().push_back({request.context.substr(0, 8), 0.5, 0, 8});
  (void)polyhal::question_answering_answer(answers, request);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const polyhal::ApiLimits limits{64, 8};
  const auto guarded = [](auto&& parse) {
    try {
      parse();
    } catch (const polyhal::ApiError&) {
    }
  };
  guarded([&] { embeddings(body, limits, false); });
  guarded([&] { embeddings(body, limits, true); });
  guarded([&] { classification(body, limits); });
  guarded([&] { token_states(body, limits); });
  guarded([&] { rerank(body, limits); });
  guarded([&] { tokens(body, limits); });
  guarded([&] { questions(body, limits); });
  return 0;
}
