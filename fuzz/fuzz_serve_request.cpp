// polyhal serve's request bodies (serve_api.hpp): any bytes as an OpenAI
// embeddings request and as a text-embeddings-inference one; a parsed
// request's answer is written too.
#include <cstdint>
#include <string_view>

#include "polyhal/app/serve_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const polyhal::ApiLimits limits{64, 8};
  for (const bool tei : {false, true}) {
    try {
      const auto request = tei ? polyhal::parse_tei_embed(body, limits)
                               : polyhal::parse_openai_embeddings(body, limits);
      std::vector<std::vector<float>> embeddings(request.inputs.size(),
                                                 std::vector<float>(8, 0.5f));
      (void)polyhal::openai_embeddings_answer(embeddings, request.base64, request.model, 1);
      (void)polyhal::tei_error_body(400, request.model);
    } catch (const polyhal::ApiError&) {
    }
  }
  return 0;
}
