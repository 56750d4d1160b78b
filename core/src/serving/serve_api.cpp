// The serving APIs' bodies (serve_api.hpp): parsed with nlohmann::json, whose
// parser refuses invalid UTF-8, then checked key by key.
#include "polyhal/app/serve_api.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <utility>

#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

using nlohmann::json;

/// Every body goes through the depth-capped reader: a value nested deeper
/// than any API needs is refused while it is read, and no message about a
/// value prints more than json_excerpt's bounded piece of it.
json parse_object(std::string_view body) {
  json doc;
  try {
    doc = parse_json_input(body, "the body");
  } catch (const ConfigError& e) {  // nested too deep
    throw ApiError(400, e.what());
  } catch (const json::parse_error& e) {
    // e.byte is where the parser stopped: enough to find a stray character.
    throw ApiError(400, fmt::format("the body is not JSON (at byte {}): {}", e.byte,
                                    std::string_view(e.what()).substr(0, 200)));
  } catch (const json::exception& e) {  // a number out of range, ...
    throw ApiError(400, fmt::format("the body is not JSON polyhal can read: {}",
                                    std::string_view(e.what()).substr(0, 200)));
  }
  if (!doc.is_object()) throw ApiError(400, "the body must be a JSON object");
  return doc;
}

const char* type_name(const json& value) {
  return value.type_name();
}

/// `key` as one string or a list of strings, each non-empty.
std::vector<std::string> texts(const json& doc, const char* key, const ApiLimits& limits) {
  const auto it = doc.find(key);
  if (it == doc.end())
    throw ApiError(400, fmt::format("'{}' is missing: give a string or a list of strings", key));
  std::vector<std::string> out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    if (it->empty()) throw ApiError(400, fmt::format("'{}' is an empty list", key));
    if (static_cast<std::int64_t>(it->size()) > limits.max_inputs)
      throw ApiError(400, fmt::format("'{}' holds {} texts; at most {} per request "
                                      "(serve.max_inputs): split the request",
                                      key, it->size(), limits.max_inputs));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& item = (*it)[i];
      if (item.is_number_integer() || item.is_array())
        throw ApiError(400, fmt::format("'{}'[{}] is a token id or list: this server reads "
                                        "text; send the strings",
                                        key, i));
      if (!item.is_string())
        throw ApiError(400,
                       fmt::format("'{}'[{}] is {}, expected a string", key, i, type_name(item)));
      out.push_back(item.get<std::string>());
    }
  } else {
    throw ApiError(400, fmt::format("'{}' is {}, expected a string or a list of strings", key,
                                    type_name(*it)));
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].empty())
      throw ApiError(400, fmt::format("'{}'{} is an empty string", key,
                                      it->is_array() ? fmt::format("[{}]", i) : ""));
  return out;
}

/// A field the route does not read is refused by name: a client's option
/// is never silently dropped.
void refuse_unknown_fields(const json& doc, std::initializer_list<const char*> fields,
                           const char* route) {
  for (const auto& item : doc.items()) {
    // Not a structured binding: clang 14 (the fuzz build's) cannot capture one.
    const std::string& key = item.key();
    if (std::none_of(fields.begin(), fields.end(), [&](const char* f) { return key == f; }))
      throw ApiError(400, fmt::format("{} is not a field {} reads (it reads: {})",
                                      json_excerpt(json(key)), route, fmt::join(fields, ", ")));
  }
}

/// TEI's truncation_direction: true for "Left" (keep a text's end). Pairs
/// (/predict, /rerank) are cut longest first from the right only.
bool left_truncation(const json& doc, bool pairs) {
  const auto it = doc.find("truncation_direction");
  if (it == doc.end() || it->is_null()) return false;
  if (it->is_string() && (*it == "Right" || *it == "right")) return false;
  if (!pairs && it->is_string() && (*it == "Left" || *it == "left")) return true;
  throw ApiError(400, fmt::format("'truncation_direction' is {}: expected {}", json_excerpt(*it),
                                  pairs ? "\"Right\" (pairs are cut longest first from the "
                                          "right; \"Left\" is served for single texts)"
                                        : "\"Right\" or \"Left\""));
}

/// "dimensions": the first N of the model's dimensions (Matryoshka), 0 if absent.
std::int64_t embedding_dimensions(const json& doc, const ApiLimits& limits) {
  const auto it = doc.find("dimensions");
  if (it == doc.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
      it->get<std::int64_t>() > limits.dimensions)
    throw ApiError(400, fmt::format("'dimensions' is {}: expected 1 to {} (this model's size); "
                                    "the first N are returned, normalised again when the "
                                    "embeddings are",
                                    json_excerpt(*it), limits.dimensions));
  return it->get<std::int64_t>();
}

/// TEI's "prompt_name": a name of the model's prompts, "" if absent.
std::string prompt_name_of(const json& doc) {
  const auto it = doc.find("prompt_name");
  if (it == doc.end() || it->is_null()) return {};
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    throw ApiError(400, fmt::format("'prompt_name' is {}: expected the name of one of the "
                                    "model's prompts",
                                    json_excerpt(*it)));
  return it->get<std::string>();
}

EmbeddingEncoding embedding_encoding(const json& doc) {
  static constexpr std::array<std::pair<std::string_view, EmbeddingEncoding>, 6> kNames{{
      {"float", EmbeddingEncoding::float32},
      {"base64", EmbeddingEncoding::base64},
      {"int8", EmbeddingEncoding::int8},
      {"uint8", EmbeddingEncoding::uint8},
      {"binary", EmbeddingEncoding::binary},
      {"ubinary", EmbeddingEncoding::ubinary},
  }};
  const auto it = doc.find("encoding_format");
  if (it == doc.end() || it->is_null()) return EmbeddingEncoding::float32;
  if (it->is_string())
    for (const auto& [name, encoding] : kNames)
      if (it->get_ref<const std::string&>() == name) return encoding;
  throw ApiError(400, fmt::format("'encoding_format' is {}: expected \"float\", \"base64\", "
                                  "\"int8\", \"uint8\", \"binary\" or \"ubinary\"",
                                  json_excerpt(*it)));
}

std::optional<bool> optional_bool(const json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw ApiError(400, fmt::format("'{}' is {}, expected true or false", key, type_name(*it)));
  return it->get<bool>();
}

}  // namespace

EmbedRequest parse_openai_embeddings(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc, {"input", "model", "encoding_format", "dimensions", "user"},
                        "/v1/embeddings");
  EmbedRequest out;
  out.inputs = texts(doc, "input", limits);
  if (const auto it = doc.find("model"); it != doc.end() && !it->is_null()) {
    if (!it->is_string())
      throw ApiError(400, fmt::format("'model' is {}, expected a string", type_name(*it)));
    out.model = it->get<std::string>();
  }
  out.encoding = embedding_encoding(doc);
  out.dimensions = embedding_dimensions(doc, limits);
  if (const auto it = doc.find("user"); it != doc.end() && !it->is_null() && !it->is_string())
    throw ApiError(400, fmt::format("'user' is {}, expected a string", type_name(*it)));
  return out;
}

EmbedRequest parse_tei_embed(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(
      doc, {"inputs", "normalize", "truncate", "truncation_direction", "prompt_name", "dimensions"},
      "/embed");
  EmbedRequest out;
  out.inputs = texts(doc, "inputs", limits);
  out.normalize = optional_bool(doc, "normalize").value_or(true);
  out.truncate = optional_bool(doc, "truncate");
  out.truncate_left = left_truncation(doc, false);
  out.dimensions = embedding_dimensions(doc, limits);
  out.prompt_name = prompt_name_of(doc);
  return out;
}

namespace {

/// /embed_all's and /embed_sparse's body (TEI's fields of both).
EmbedRequest token_route_request(std::string_view body, const ApiLimits& limits,
                                 const char* route) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc, {"inputs", "truncate", "truncation_direction", "prompt_name"}, route);
  EmbedRequest out;
  out.inputs = texts(doc, "inputs", limits);
  out.normalize = false;
  out.truncate = optional_bool(doc, "truncate");
  out.truncate_left = left_truncation(doc, false);
  out.prompt_name = prompt_name_of(doc);
  return out;
}

}  // namespace

EmbedRequest parse_tei_embed_all(std::string_view body, const ApiLimits& limits) {
  return token_route_request(body, limits, "/embed_all");
}

EmbedRequest parse_tei_embed_sparse(std::string_view body, const ApiLimits& limits) {
  return token_route_request(body, limits, "/embed_sparse");
}

namespace {

bool flag(const json& doc, const char* key) {
  return optional_bool(doc, key).value_or(false);
}

/// One /predict sequence: a string, or a list of one or two strings.
TextPair predict_sequence(const json& item, const std::string& where) {
  if (item.is_string()) return {item.get<std::string>(), std::nullopt};
  if (!item.is_array() || item.empty() || item.size() > 2)
    throw ApiError(400, fmt::format("{} is {}: expected a text or a list of one text or a pair "
                                    "of texts",
                                    where, json_excerpt(item)));
  for (std::size_t k = 0; k < item.size(); ++k)
    if (!item[k].is_string())
      throw ApiError(400,
                     fmt::format("{}[{}] is {}, expected a string", where, k, type_name(item[k])));
  TextPair out{item[0].get<std::string>(), std::nullopt};
  if (item.size() == 2) out.b = item[1].get<std::string>();
  return out;
}

void refuse_empty(const TextPair& pair, const std::string& where) {
  if (pair.a.empty() || (pair.b && pair.b->empty()))
    throw ApiError(400, fmt::format("{} holds an empty string", where));
}

/// The indices of `scores`, highest score first (ties in input order).
std::vector<std::size_t> best_first(const std::vector<float>& scores) {
  std::vector<std::size_t> order(scores.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return scores[x] > scores[y]; });
  return order;
}

std::int64_t bounded_integer(const json& doc, const char* key, std::int64_t fallback,
                             std::int64_t low, std::int64_t high) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < low || it->get<std::int64_t>() > high)
    throw ApiError(400, fmt::format("'{}' is {}: expected an integer from {} to {}", key,
                                    json_excerpt(*it), low, high));
  return it->get<std::int64_t>();
}

std::string required_text(const json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw ApiError(400, fmt::format("'{}' is {}: expected a non-empty string", key,
                                    it == doc.end() ? "missing" : json_excerpt(*it)));
  return it->get<std::string>();
}

/// Cohere's (and Jina's, infinity's) rerank body.
RerankRequest cohere_rerank(const json& doc, const ApiLimits& limits) {
  refuse_unknown_fields(doc,
                        {"query", "documents", "top_n", "return_documents", "model", "raw_scores"},
                        "/rerank (Cohere's shape, with \"documents\")");
  RerankRequest out;
  out.cohere = true;
  out.query = required_text(doc, "query");
  const json& documents = doc.at("documents");
  if (!documents.is_array() || documents.empty())
    throw ApiError(400, "'documents' must be a non-empty list of texts or {\"text\": ...}");
  if (static_cast<std::int64_t>(documents.size()) > limits.max_inputs)
    throw ApiError(400, fmt::format("'documents' holds {} texts; at most {} per request "
                                    "(serve.max_inputs): split the request",
                                    documents.size(), limits.max_inputs));
  for (std::size_t i = 0; i < documents.size(); ++i) {
    const json& item = documents[i];
    const json* text = item.is_object() && item.contains("text") ? &item.at("text") : &item;
    if (!text->is_string() || text->get_ref<const std::string&>().empty())
      throw ApiError(400, fmt::format("'documents'[{}] is {}: expected a non-empty string or "
                                      "{{\"text\": a non-empty string}}",
                                      i, json_excerpt(item)));
    out.texts.push_back(text->get<std::string>());
  }
  out.top_n = bounded_integer(doc, "top_n", 0, 1, 1'000'000);
  out.return_text = flag(doc, "return_documents");
  out.raw_scores = flag(doc, "raw_scores");
  if (const auto it = doc.find("model"); it != doc.end() && !it->is_null()) {
    if (!it->is_string())
      throw ApiError(400, fmt::format("'model' is {}, expected a string", type_name(*it)));
    out.model = it->get<std::string>();
  }
  return out;
}

}  // namespace

namespace {

/// The Hugging Face Inference API's text-classification "parameters"
/// (huggingface_hub's text_classification sends them, empty by default).
void predict_parameters(const json& doc, PredictRequest& out) {
  const auto it = doc.find("parameters");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_object())
    throw ApiError(400, fmt::format("'parameters' is {}, expected an object", type_name(*it)));
  refuse_unknown_fields(*it, {"function_to_apply", "top_k"}, "/predict's 'parameters'");
  out.top_k = bounded_integer(*it, "top_k", 0, 1, 1'000'000);
  const auto f = it->find("function_to_apply");
  if (f == it->end() || f->is_null()) return;
  if (*f == "sigmoid" || *f == "softmax")
    out.independent = *f == "sigmoid";
  else if (*f == "none")
    out.function_none = true;
  else
    throw ApiError(400, fmt::format("'function_to_apply' is {}: expected \"sigmoid\", "
                                    "\"softmax\" or \"none\"",
                                    json_excerpt(*f)));
}

}  // namespace

PredictRequest parse_tei_predict(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(
      doc, {"inputs", "raw_scores", "truncate", "truncation_direction", "parameters"}, "/predict");
  (void)left_truncation(doc, true);
  PredictRequest out;
  predict_parameters(doc, out);
  const auto it = doc.find("inputs");
  if (it == doc.end())
    throw ApiError(400, "'inputs' is missing: give a text, a pair [a, b] or a batch [[a], [a, b]]");
  // TEI's reading: a list whose first item is a list is a batch.
  out.batch = it->is_array() && !it->empty() && it->front().is_array();
  if (out.batch) {
    if (static_cast<std::int64_t>(it->size()) > limits.max_inputs)
      throw ApiError(400, fmt::format("'inputs' holds {} inputs; at most {} per request "
                                      "(serve.max_inputs): split the request",
                                      it->size(), limits.max_inputs));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string where = fmt::format("'inputs'[{}]", i);
      if (!(*it)[i].is_array())
        throw ApiError(400, fmt::format("{} is {}: in a batch every input is a list [text] or "
                                        "[a, b]",
                                        where, type_name((*it)[i])));
      out.inputs.push_back(predict_sequence((*it)[i], where));
      refuse_empty(out.inputs.back(), where);
    }
  } else {
    out.inputs.push_back(predict_sequence(*it, "'inputs'"));
    refuse_empty(out.inputs.back(), "'inputs'");
  }
  out.raw_scores = flag(doc, "raw_scores");
  out.truncate = optional_bool(doc, "truncate");
  return out;
}

RerankRequest parse_tei_rerank(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  if (doc.contains("documents")) return cohere_rerank(doc, limits);
  refuse_unknown_fields(
      doc, {"query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction"},
      "/rerank");
  (void)left_truncation(doc, true);
  RerankRequest out;
  out.query = required_text(doc, "query");
  const auto it = doc.find("texts");
  if (it == doc.end() || !it->is_array())
    throw ApiError(400, "'texts' must be a list of the texts to rank against the query");
  out.texts = texts(doc, "texts", limits);
  out.raw_scores = flag(doc, "raw_scores");
  out.return_text = flag(doc, "return_text");
  out.truncate = optional_bool(doc, "truncate");
  return out;
}

std::string requested_model(std::string_view body) {
  try {
    const json doc = parse_object(body);
    const auto it = doc.find("model");
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  } catch (const ApiError&) {
    return {};  // the route's parser says what is wrong
  }
}

std::string_view tei_root_route(std::string_view body, bool classifier) {
  json doc;
  try {
    doc = parse_object(body);
  } catch (const ApiError&) {
    return classifier ? "/predict" : "/embed";  // which says what is wrong
  }
  if (classifier) return doc.contains("query") ? "/rerank" : "/predict";
  const auto inputs = doc.find("inputs");
  return inputs != doc.end() && inputs->is_object() ? "/similarity" : "/embed";
}

SimilarityRequest parse_tei_similarity(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc,
                        {"inputs", "parameters", "truncate", "truncation_direction", "prompt_name"},
                        "/similarity");
  // TEI reads the options from "parameters" (as huggingface_hub sends them);
  // at the top level they are read too, never both.
  json options = doc;
  options.erase("inputs");
  if (const auto p = doc.find("parameters"); p != doc.end() && !p->is_null()) {
    if (!p->is_object() || options.size() > 1)
      throw ApiError(400,
                     "'parameters' must be an object of truncate, truncation_direction and "
                     "prompt_name, with none of them beside it");
    options = *p;
    refuse_unknown_fields(options, {"truncate", "truncation_direction", "prompt_name"},
                          "/similarity's 'parameters'");
  }
  const bool truncate_left = left_truncation(options, false);
  const auto it = doc.find("inputs");
  if (it == doc.end() || !it->is_object())
    throw ApiError(400, "'inputs' must be {\"source_sentence\": a text, \"sentences\": [texts]}");
  refuse_unknown_fields(*it, {"source_sentence", "sentences"}, "/similarity's 'inputs'");
  SimilarityRequest out;
  out.truncate_left = truncate_left;
  out.source = required_text(*it, "source_sentence");
  const auto sentences = it->find("sentences");
  if (sentences == it->end() || !sentences->is_array())
    throw ApiError(400, "'inputs'.'sentences' must be a list of the texts to compare");
  out.sentences = texts(*it, "sentences", limits);
  out.truncate = optional_bool(options, "truncate");
  out.prompt_name = prompt_name_of(options);
  return out;
}

TokenizeRequest parse_tei_tokenize(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc, {"inputs", "add_special_tokens", "prompt_name"}, "/tokenize");
  TokenizeRequest out;
  out.inputs = texts(doc, "inputs", limits);
  out.add_special_tokens = optional_bool(doc, "add_special_tokens").value_or(true);
  out.prompt_name = prompt_name_of(doc);
  return out;
}

DecodeRequest parse_tei_decode(std::string_view body, const ApiLimits& limits,
                               std::size_t vocab_size) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc, {"ids", "skip_special_tokens"}, "/decode");
  if (!optional_bool(doc, "skip_special_tokens").value_or(true))
    throw ApiError(400,
                   "'skip_special_tokens' false is not served: the special tokens are left "
                   "out of the text");
  const auto it = doc.find("ids");
  if (it == doc.end() || !it->is_array() || it->empty())
    throw ApiError(400, "'ids' must be a list of token ids, or a list of such lists");
  const bool batch = it->front().is_array();
  if (batch && static_cast<std::int64_t>(it->size()) > limits.max_inputs)
    throw ApiError(400, fmt::format("'ids' holds {} lists; at most {} per request "
                                    "(serve.max_inputs): split the request",
                                    it->size(), limits.max_inputs));
  DecodeRequest out;
  const auto read = [&](const json& list, const std::string& where) {
    if (!list.is_array())
      throw ApiError(400,
                     fmt::format("{} is {}: expected a list of token ids", where, type_name(list)));
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& id = list[i];
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          static_cast<std::uint64_t>(id.get<std::int64_t>()) >= vocab_size)
        throw ApiError(400, fmt::format("{}[{}] is {}: expected a token id from 0 to {}", where, i,
                                        json_excerpt(id), vocab_size - 1));
      ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
    }
    out.ids.push_back(std::move(ids));
  };
  if (batch) {
    for (std::size_t i = 0; i < it->size(); ++i) read((*it)[i], fmt::format("'ids'[{}]", i));
  } else {
    read(*it, "'ids'");
  }
  return out;
}

QuestionRequest parse_question_answering(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  refuse_unknown_fields(doc, {"question", "context", "top_k", "max_answer_length"},
                        "/v1/question-answering");
  QuestionRequest out;
  out.context = required_text(doc, "context");
  const auto it = doc.find("question");
  out.batch = it != doc.end() && it->is_array();
  out.questions = texts(doc, "question", limits);
  out.top_k = bounded_integer(doc, "top_k", 1, 1, 20);
  out.max_answer_length = bounded_integer(doc, "max_answer_length", 30, 1, 512);
  return out;
}

std::vector<float> label_scores(std::span<const float> logits, bool independent, bool raw) {
  std::vector<float> out(logits.begin(), logits.end());
  if (raw || out.empty()) return out;
  if (independent) {
    for (float& v : out) v = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
    return out;
  }
  const float largest = *std::max_element(out.begin(), out.end());
  double total = 0;
  for (float& v : out) {
    v = static_cast<float>(std::exp(static_cast<double>(v) - largest));
    total += v;
  }
  for (float& v : out) v = static_cast<float>(v / total);
  return out;
}

std::string tei_predict_answer(const std::vector<std::vector<float>>& scores,
                               const std::vector<std::string>& labels, bool batch,
                               std::int64_t top_k) {
  json all = json::array();
  for (const auto& one : scores) {
    json list = json::array();
    for (const std::size_t i : best_first(one)) {
      if (top_k > 0 && std::ssize(list) >= top_k) break;
      list.push_back({{"score", one[i]}, {"label", i < labels.size() ? labels[i] : ""}});
    }
    all.push_back(std::move(list));
  }
  return (batch || all.empty() ? all : all.front())
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string tei_rerank_answer(const std::vector<float>& scores, const RerankRequest& request) {
  json out = json::array();
  for (const std::size_t i : best_first(scores)) {
    json rank{{"index", i}, {"score", scores[i]}};
    if (request.return_text) rank["text"] = request.texts.at(i);
    out.push_back(std::move(rank));
  }
  return out.dump();
}

std::string rerank_answer(const std::vector<float>& scores, const RerankRequest& request,
                          const std::string& model, std::int64_t tokens) {
  if (!request.cohere) return tei_rerank_answer(scores, request);
  json results = json::array();
  for (const std::size_t i : best_first(scores)) {
    if (request.top_n > 0 && std::ssize(results) >= request.top_n) break;
    json result{{"index", i}, {"relevance_score", scores[i]}};
    if (request.return_text) result["document"] = {{"text", request.texts.at(i)}};
    results.push_back(std::move(result));
  }
  return json{{"object", "rerank"},
              {"model", request.model.empty() ? model : request.model},
              {"results", std::move(results)},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
      .dump();
}

std::string question_answering_answer(const std::vector<std::vector<ServedAnswer>>& answers,
                                      const QuestionRequest& request) {
  json all = json::array();
  for (const auto& question : answers) {
    json list = json::array();
    for (const auto& a : question)
      list.push_back({{"answer", a.text}, {"score", a.score}, {"start", a.start}, {"end", a.end}});
    if (list.empty()) list.push_back({{"answer", ""}, {"score", 0.0}, {"start", 0}, {"end", 0}});
    all.push_back(request.top_k == 1 ? list.front() : list);
  }
  return (request.batch ? all : all.front()).dump(-1, ' ', false, json::error_handler_t::replace);
}

void l2_normalize(std::span<float> values) {
  double sum = 0;
  for (const float v : values) sum += static_cast<double>(v) * v;
  if (sum <= 0) return;
  const double scale = 1.0 / std::sqrt(sum);
  for (float& v : values) v = static_cast<float>(v * scale);
}

std::string base64_encode(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    for (int shift : {18, 12, 6, 0}) out.push_back(kDigits[(v >> shift) & 63]);
  }
  if (const std::size_t left = bytes.size() - i; left > 0) {
    std::uint32_t v = bytes[i] << 16;
    if (left == 2) v |= bytes[i + 1] << 8;
    out.push_back(kDigits[(v >> 18) & 63]);
    out.push_back(kDigits[(v >> 12) & 63]);
    out.push_back(left == 2 ? kDigits[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

namespace {

/// int8: one symmetric scale per embedding (its largest magnitude to 127).
std::vector<int> int8_levels(std::span<const float> e, int offset) {
  float peak = 0;
  for (const float v : e) peak = std::max(peak, std::fabs(v));
  const float scale = peak > 0 ? 127.0f / peak : 0.0f;
  std::vector<int> out(e.size());
  for (std::size_t i = 0; i < e.size(); ++i)
    out[i] = static_cast<int>(std::lround(std::clamp(e[i] * scale, -127.0f, 127.0f))) + offset;
  return out;
}

/// binary: the signs, eight to a byte, first dimension in the high bit.
std::vector<int> sign_bits(std::span<const float> e, int offset) {
  std::vector<int> out((e.size() + 7) / 8, 0);
  for (std::size_t i = 0; i < e.size(); ++i)
    if (e[i] > 0) out[i / 8] |= 0x80 >> (i % 8);
  for (int& byte : out) byte += offset;
  return out;
}

json encoded(std::span<const float> e, EmbeddingEncoding encoding) {
  switch (encoding) {
    case EmbeddingEncoding::float32:
      break;
    case EmbeddingEncoding::base64: {
      std::vector<std::uint8_t> bytes(e.size() * sizeof(float));
      std::memcpy(bytes.data(), e.data(), bytes.size());  // x86-64: little-endian already
      return base64_encode(bytes);
    }
    case EmbeddingEncoding::int8:
      return int8_levels(e, 0);
    case EmbeddingEncoding::uint8:
      return int8_levels(e, 128);
    case EmbeddingEncoding::binary:
      return sign_bits(e, -128);
    case EmbeddingEncoding::ubinary:
      return sign_bits(e, 0);
  }
  return std::vector<float>(e.begin(), e.end());
}

}  // namespace

std::string openai_embeddings_answer(const std::vector<std::vector<float>>& embeddings,
                                     EmbeddingEncoding encoding, const std::string& model,
                                     std::int64_t tokens) {
  json data = json::array();
  for (std::size_t i = 0; i < embeddings.size(); ++i)
    data.push_back(
        {{"object", "embedding"}, {"index", i}, {"embedding", encoded(embeddings[i], encoding)}});
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
      .dump();
}

std::string tei_embed_answer(const std::vector<std::vector<float>>& embeddings) {
  return json(embeddings).dump();
}

std::string tei_embed_sparse_answer(const std::vector<std::vector<float>>& weights) {
  json all = json::array();
  for (const auto& one : weights) {
    json entries = json::array();
    for (std::size_t i = 0; i < one.size(); ++i)
      if (one[i] > 0) entries.push_back({{"index", i}, {"value", one[i]}});
    all.push_back(std::move(entries));
  }
  return all.dump();
}

std::string tei_embed_all_answer(const std::vector<std::vector<float>>& token_states,
                                 std::size_t hidden) {
  json all = json::array();
  for (const auto& states : token_states) {
    json tokens = json::array();
    for (std::size_t at = 0; hidden > 0 && at + hidden <= states.size(); at += hidden)
      tokens.push_back(
          std::vector<float>(states.begin() + static_cast<std::ptrdiff_t>(at),
                             states.begin() + static_cast<std::ptrdiff_t>(at + hidden)));
    all.push_back(std::move(tokens));
  }
  return all.dump();
}

namespace {

const char* error_type(int status) {
  switch (status) {
    case 400:
    case 404:
    case 405:
    case 411:
    case 413:
    case 415:
    case 424:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 429:
      return "rate_limit_exceeded";
    default:
      return "server_error";
  }
}

}  // namespace

std::string openai_error_body(int status, const std::string& message) {
  return json{{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string tei_error_body(int status, const std::string& message) {
  const char* kind = status == 413   ? "Validation"
                     : status == 429 ? "Overloaded"
                     : status >= 500 ? "Backend"
                                     : "Validation";
  return json{{"error", message}, {"error_type", kind}}.dump(-1, ' ', false,
                                                             json::error_handler_t::replace);
}

}  // namespace polyhal
