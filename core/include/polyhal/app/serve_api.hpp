#pragma once
/// @file serve_api.hpp
/// The request bodies `polyhal serve` reads and the answers it writes, apart
/// from any socket (the fuzz target fuzz_serve_request drives the parsers):
/// the OpenAI embeddings API (`POST /v1/embeddings`) and
/// text-embeddings-inference's `POST /embed`. Every body is untrusted: a
/// parser either returns a request within `ApiLimits` or throws ApiError
/// with the HTTP status and a message that says what to change.
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// A request refused: its HTTP status (400, 413, ...) and why.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

struct ApiLimits {
  std::int64_t max_inputs = 512;
  std::int64_t dimensions = 0;  ///< the model's embedding size
};

/// An embeddings request of either API.
struct EmbedRequest {
  std::vector<std::string> inputs;  ///< each non-empty, valid UTF-8
  bool base64 = false;              ///< OpenAI encoding_format "base64"
  /// L2-normalise: OpenAI: as the model's sentence-transformers config says
  /// (unset here); TEI: its "normalize", default true.
  std::optional<bool> normalize;
  /// TEI "truncate": unset: the server's serve.truncate.
  std::optional<bool> truncate;
  std::string model;  ///< OpenAI "model" as given (any name is served)
};

/// `POST /v1/embeddings`: {"input": string | [string...], "model"?,
/// "encoding_format"?: "float" | "base64", "dimensions"?: the model's size,
/// "user"?}. Token arrays as input are refused (400): send text.
EmbedRequest parse_openai_embeddings(std::string_view body, const ApiLimits& limits);

/// `POST /embed`: {"inputs": string | [string...], "normalize"?: bool,
/// "truncate"?: bool, "truncation_direction"?: "Right"}.
EmbedRequest parse_tei_embed(std::string_view body, const ApiLimits& limits);

/// The OpenAI answer: {"object": "list", "data": [{"object": "embedding",
/// "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}};
/// base64 embeddings are the little-endian f32 bytes.
std::string openai_embeddings_answer(const std::vector<std::vector<float>>& embeddings, bool base64,
                                     const std::string& model, std::int64_t tokens);
/// TEI's answer: [[f32...], ...].
std::string tei_embed_answer(const std::vector<std::vector<float>>& embeddings);

/// The error bodies: OpenAI's {"error": {"message", "type", "code"}}, TEI's
/// {"error", "error_type"}.
std::string openai_error_body(int status, const std::string& message);
std::string tei_error_body(int status, const std::string& message);

/// `values` scaled to unit L2 norm (unchanged when all zero).
void l2_normalize(std::span<float> values);

/// Standard base64 of `bytes`.
std::string base64_encode(std::span<const std::uint8_t> bytes);

}  // namespace polyhal
