#pragma once
/// @file serve_api.hpp
/// The request bodies `polyhal serve` reads and the answers it writes, apart
/// from any socket (the fuzz target fuzz_serve_request drives the parsers):
/// the OpenAI embeddings API (`POST /v1/embeddings`), text-embeddings-inference's
/// `POST /embed`, `/predict` and `/rerank`, and `POST /v1/question-answering`
/// (in the shape of Hugging Face's question-answering pipeline). Every body is untrusted: a
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
#include "polyhal/app/serve_questions.hpp"

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

/// How /v1/embeddings and /embeddings write each embedding ("encoding_format"):
///  - float: a JSON list of numbers; base64: the little-endian f32 bytes, base64;
///  - int8: round(127 x / max|x|) per embedding, a JSON list of integers in
///    [-127, 127] (one scale per embedding, so cosine similarity and ranking
///    are kept; the scale is not sent); uint8: that value + 128, in [1, 255];
///  - ubinary: one bit per dimension, 1 where the value is > 0, packed eight
///    to a byte with the first dimension in the most significant bit (numpy's
///    packbits, sentence-transformers' quantize_embeddings); binary: that byte
///    - 128, in [-128, 127]. A list of ceil(dimensions / 8) integers.
/// The quantised forms apply after "dimensions" and normalisation.
enum class EmbeddingEncoding : std::uint8_t { float32, base64, int8, uint8, binary, ubinary };

/// An embeddings request of either API.
struct EmbedRequest {
  std::vector<std::string> inputs;                          ///< each non-empty, valid UTF-8
  EmbeddingEncoding encoding = EmbeddingEncoding::float32;  ///< OpenAI's encoding_format
  /// L2-normalise: OpenAI: as the model's sentence-transformers config says
  /// (unset here); TEI: its "normalize", default true.
  std::optional<bool> normalize;
  /// TEI "truncate": unset: the server's serve.truncate.
  std::optional<bool> truncate;
  bool truncate_left = false;  ///< TEI "truncation_direction": "Left" keeps the end
  std::string model;           ///< OpenAI "model" as given
  /// "dimensions": only the first N (Matryoshka), normalised again when the
  /// answer is; 0: all of them.
  std::int64_t dimensions = 0;
  /// TEI "prompt_name": a prompt of the model's config_sentence_transformers.json
  /// put before each input; empty: its default_prompt_name's, if any.
  std::string prompt_name;
};

/// `POST /v1/embeddings`: {"input": string | [string...], "model"?,
/// "encoding_format"?: "float" | "base64" | "int8" | "uint8" | "binary" |
/// "ubinary" (EmbeddingEncoding), "dimensions"?: 1 to the model's
/// size, "user"?}. Token arrays as input are refused (400): send text. Any
/// other field is refused (400) by name, on every route.
EmbedRequest parse_openai_embeddings(std::string_view body, const ApiLimits& limits);

/// `POST /embed`: {"inputs": string | [string...], "normalize"?: bool,
/// "truncate"?: bool, "truncation_direction"?: "Right" | "Left", "prompt_name"?,
/// "dimensions"?}.
EmbedRequest parse_tei_embed(std::string_view body, const ApiLimits& limits);

/// `POST /embed_all`: {"inputs", "truncate"?, "truncation_direction"?,
/// "prompt_name"?}: every token's vector (special tokens included, not
/// normalised), the multi-vector output ColBERT-style retrieval reads.
EmbedRequest parse_tei_embed_all(std::string_view body, const ApiLimits& limits);
/// `POST /embed_sparse`: the same fields; answered with each input's SPLADE
/// weights above zero, [[{"index", "value"}...]...] (a SPLADE model).
EmbedRequest parse_tei_embed_sparse(std::string_view body, const ApiLimits& limits);

/// One input of a classifier: a text, or a pair (query and passage,
/// premise and hypothesis).
struct TextPair {
  std::string a;
  std::optional<std::string> b;
};

/// `POST /predict`: {"inputs": "text" | ["text"] | ["a", "b"] (a pair) |
/// [["text"] or ["a", "b"], ...] (a batch), "raw_scores"?: bool,
/// "truncate"?: bool}, as text-embeddings-inference reads it.
struct PredictRequest {
  std::vector<TextPair> inputs;
  bool batch = false;  ///< answer a list per input
  bool raw_scores = false;
  std::optional<bool> truncate;
  /// "parameters" (the Hugging Face Inference API's, which huggingface_hub
  /// sends): {"function_to_apply"?: "sigmoid" | "softmax" | "none",
  /// "top_k"?}. Sigmoid or softmax over the model's own choice; "none": the
  /// logits, as raw_scores; top_k: the best k labels only (0: all).
  std::optional<bool> independent;
  bool function_none = false;
  std::int64_t top_k = 0;
};
PredictRequest parse_tei_predict(std::string_view body, const ApiLimits& limits);

/// `POST /rerank`: {"query": string, "texts": [string...], "raw_scores"?,
/// "return_text"?, "truncate"?}.
struct RerankRequest {
  std::string query;
  std::vector<std::string> texts;
  bool raw_scores = false, return_text = false;
  std::optional<bool> truncate;
  /// Cohere's and Jina's shape (which infinity serves): {"query",
  /// "documents": [string | {"text"}...], "top_n"?, "return_documents"?,
  /// "model"?, "raw_scores"?}, answered {"object": "rerank", "model",
  /// "results": [{"index", "relevance_score", "document"?: {"text"}}],
  /// "usage"}. Read when the body has "documents".
  bool cohere = false;
  std::int64_t top_n = 0;  ///< 0: every document
  std::string model;
};
RerankRequest parse_tei_rerank(std::string_view body, const ApiLimits& limits);
/// The answer in the request's shape (TEI's list, or Cohere's results);
/// `model` and `tokens` fill Cohere's "model" and "usage".
std::string rerank_answer(const std::vector<float>& scores, const RerankRequest& request,
                          const std::string& model, std::int64_t tokens);

/// The body's "model" (OpenAI's and Cohere's field) when it is a string,
/// else empty: which of several served models a request is for.
std::string requested_model(std::string_view body);

/// text-embeddings-inference's `POST /`, which huggingface_hub's
/// InferenceClient calls with a server's URL: the route its body is for on
/// this kind of model: an embedding model's "/similarity" ("inputs" an
/// object) or "/embed"; a classifier's "/rerank" (a "query") or "/predict".
/// A body that is not a JSON object gets the plain route, whose parser says why.
std::string_view tei_root_route(std::string_view body, bool classifier);

/// `POST /similarity`: {"inputs": {"source_sentence": string, "sentences":
/// [string...]}, "parameters"?: {"truncate"?, "truncation_direction"?: "Right" |
/// "Left", "prompt_name"?}} (TEI's shape; the three also at the top level),
/// as text-embeddings-inference reads it; answered with each sentence's
/// cosine similarity to the source.
struct SimilarityRequest {
  std::string source;
  std::vector<std::string> sentences;
  std::optional<bool> truncate;
  bool truncate_left = false;
  std::string prompt_name;
};
SimilarityRequest parse_tei_similarity(std::string_view body, const ApiLimits& limits);

/// `POST /tokenize`: {"inputs": string | [string...], "add_special_tokens"?:
/// true, "prompt_name"?}, as text-embeddings-inference reads it.
struct TokenizeRequest {
  std::vector<std::string> inputs;
  bool add_special_tokens = true;
  std::string prompt_name;
};
TokenizeRequest parse_tei_tokenize(std::string_view body, const ApiLimits& limits);

/// `POST /decode`: {"ids": [id...] | [[id...]...], "skip_special_tokens"?:
/// true}; each id below `vocab_size`.
struct DecodeRequest {
  std::vector<std::vector<std::int32_t>> ids;
};
DecodeRequest parse_tei_decode(std::string_view body, const ApiLimits& limits,
                               std::size_t vocab_size);

/// `POST /v1/question-answering`: {"question": string | [string...],
/// "context": string, "top_k"?: 1..20, "max_answer_length"?: 1..512}.
struct QuestionRequest {
  std::vector<std::string> questions;
  std::string context;
  bool batch = false;  ///< "question" was a list
  std::int64_t top_k = 1;
  std::int64_t max_answer_length = 30;
};
QuestionRequest parse_question_answering(std::string_view body, const ApiLimits& limits);

/// Scores from a classifier's logits: sigmoid per label when `independent`
/// (one logit, or multi-label), else softmax; the logits themselves when `raw`.
std::vector<float> label_scores(std::span<const float> logits, bool independent, bool raw);

/// TEI's /predict answer: per input, [{"score", "label"}...] best first (the
/// best `top_k`, 0: all); a list of those for a batch.
std::string tei_predict_answer(const std::vector<std::vector<float>>& scores,
                               const std::vector<std::string>& labels, bool batch,
                               std::int64_t top_k = 0);
/// TEI's /rerank answer: [{"index", "score", "text"?}...] best first.
std::string tei_rerank_answer(const std::vector<float>& scores, const RerankRequest& request);

/// Per question {"answer", "score", "start", "end"} (a list of the top_k
/// best when top_k > 1; {"answer": "", "score": 0, ...} when none fits); a
/// list of those when the request's "question" was a list.
std::string question_answering_answer(const std::vector<std::vector<ServedAnswer>>& answers,
                                      const QuestionRequest& request);

/// The OpenAI answer: {"object": "list", "data": [{"object": "embedding",
/// "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}};
/// each embedding written as `encoding` says.
std::string openai_embeddings_answer(const std::vector<std::vector<float>>& embeddings,
                                     EmbeddingEncoding encoding, const std::string& model,
                                     std::int64_t tokens);
/// TEI's answer: [[f32...], ...].
std::string tei_embed_answer(const std::vector<std::vector<float>>& embeddings);
/// /embed_sparse's answer from each input's weights (one per vocabulary
/// entry): the entries above zero, in index order.
std::string tei_embed_sparse_answer(const std::vector<std::vector<float>>& weights);
/// /embed_all's answer: [[[f32 x hidden] per token] per input], from each
/// input's tokens x hidden values.
std::string tei_embed_all_answer(const std::vector<std::vector<float>>& token_states,
                                 std::size_t hidden);

/// The error bodies: OpenAI's {"error": {"message", "type", "code"}}, TEI's
/// {"error", "error_type"}.
std::string openai_error_body(int status, const std::string& message);
std::string tei_error_body(int status, const std::string& message);

/// `values` scaled to unit L2 norm (unchanged when all zero).
void l2_normalize(std::span<float> values);

/// Standard base64 of `bytes`.
std::string base64_encode(std::span<const std::uint8_t> bytes);

}  // namespace polyhal
