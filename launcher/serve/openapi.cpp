#include "serve/openapi.hpp"

#include <nlohmann/json.hpp>

#include <string_view>

namespace polyhal::serve {
namespace {

using nlohmann::json;

struct Operation {
  const char* path;
  const char* method;
  const char* request;  ///< a schema of components, or none (GET)
  const char* answer;   ///< none: not JSON
  bool tei;             ///< errors in text-embeddings-inference's shape, else OpenAI's
  const char* summary;
};

// One row per route of http_server.cpp's table; serve_openapi.py checks
// that each answers and that no other does.
constexpr Operation kOperations[] = {
    // path, method, request schema (none: GET), answer schema, TEI's error shape, summary
    {"/health", "get", nullptr, "Status", false, "The process answers (no token needed)"},
    {"/ready", "get", nullptr, "Status", false,
     "The model is loaded and warm, and not draining (else 503)"},
    {"/v1/models", "get", nullptr, "Models", false, "The served model, in OpenAI's list shape"},
    {"/metrics", "get", nullptr, nullptr, false, "Prometheus text"},
    {"/info", "get", nullptr, "Info", true,
     "text-embeddings-inference's model description and limits"},
    {"/openapi.json", "get", nullptr, nullptr, false, "This document"},
    {"/", "post", "RootRequest", "RootResponse", true,
     "text-embeddings-inference's root: the route of the served kind of model its body is for "
     "(/embed or /similarity; /predict or /rerank; /embed_sparse; question answering)"},
    {"/tokenize", "post", "TokenizeRequest", "TokenizeResponse", true,
     "Tokens with ids, byte offsets and whether special"},
    {"/decode", "post", "DecodeRequest", "DecodeResponse", true,
     "Ids back to text, special tokens left out"},
    {"/v1/embeddings", "post", "OpenAIEmbeddingsRequest", "OpenAIEmbeddingsResponse", false,
     "OpenAI's embeddings API (embedding model)"},
    {"/embeddings", "post", "OpenAIEmbeddingsRequest", "OpenAIEmbeddingsResponse", false,
     "infinity's path of the same (embedding model)"},
    {"/embed", "post", "EmbedRequest", "EmbedResponse", true,
     "text-embeddings-inference's sentence embeddings (embedding model)"},
    {"/embed_all", "post", "EmbedAllRequest", "EmbedAllResponse", true,
     "Every token's vector (embedding model)"},
    {"/embed_sparse", "post", "EmbedAllRequest", "EmbedSparseResponse", true,
     "A SPLADE model's vocabulary weights above zero (a *ForMaskedLM model with pooling "
     "splade)"},
    {"/similarity", "post", "SimilarityRequest", "SimilarityResponse", true,
     "Each sentence's cosine similarity to the source (embedding model)"},
    {"/predict", "post", "PredictRequest", "PredictResponse", true,
     "Label scores of texts or pairs (classifier)"},
    {"/rerank", "post", "RerankRequest", "RerankResponse", true,
     "Texts ranked by relevance to a query (cross-encoder), in TEI's or Cohere's shape"},
    {"/v1/rerank", "post", "RerankRequest", "RerankResponse", true, "The same at Cohere's v1 path"},
    {"/v2/rerank", "post", "RerankRequest", "RerankResponse", true, "The same at Cohere's v2 path"},
    {"/v1/question-answering", "post", "QuestionAnsweringRequest", "QuestionAnsweringResponse",
     false, "Extractive answers in Hugging Face's pipeline shape (question answering)"},
};

// The schemas, as JSON Schema 2020-12 (which OpenAPI 3.1 uses). A raw string
// keeps them readable and diffable against serve_api.hpp's field lists.
constexpr const char* kComponents = R"json({
  "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
  "schemas": {
    "Text": {"type": "string", "minLength": 1},
    "Texts": {"oneOf": [{"$ref": "#/components/schemas/Text"},
                        {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Text"}}]},
    "TruncationDirection": {"enum": ["Right", "Left", "right", "left"]},
    "Vector": {"type": "array", "items": {"type": "number"}},
    "OpenAIEmbeddingsRequest": {
      "type": "object", "additionalProperties": false, "required": ["input"],
      "properties": {
        "input": {"$ref": "#/components/schemas/Texts"},
        "model": {"type": "string"},
        "encoding_format": {"enum": ["float", "base64", "int8", "uint8", "binary", "ubinary"]},
        "dimensions": {"type": "integer", "minimum": 1},
        "user": {"type": "string"}}},
    "OpenAIEmbeddingsResponse": {
      "type": "object", "required": ["object", "data", "model", "usage"],
      "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {
          "type": "object", "required": ["object", "index", "embedding"],
          "properties": {
            "object": {"const": "embedding"},
            "index": {"type": "integer", "minimum": 0},
            "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                                    {"type": "string", "contentEncoding": "base64"}]}}}},
        "model": {"type": "string"},
        "usage": {"$ref": "#/components/schemas/Usage"}}},
    "Usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
              "properties": {"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}},
    "EmbedRequest": {
      "type": "object", "additionalProperties": false, "required": ["inputs"],
      "properties": {
        "inputs": {"$ref": "#/components/schemas/Texts"},
        "normalize": {"type": "boolean", "default": true},
        "truncate": {"type": ["boolean", "null"]},
        "truncation_direction": {"$ref": "#/components/schemas/TruncationDirection"},
        "prompt_name": {"type": ["string", "null"]},
        "dimensions": {"type": ["integer", "null"], "minimum": 1}}},
    "EmbedResponse": {"type": "array", "items": {"$ref": "#/components/schemas/Vector"}},
    "EmbedAllRequest": {
      "type": "object", "additionalProperties": false, "required": ["inputs"],
      "properties": {
        "inputs": {"$ref": "#/components/schemas/Texts"},
        "truncate": {"type": ["boolean", "null"]},
        "truncation_direction": {"$ref": "#/components/schemas/TruncationDirection"},
        "prompt_name": {"type": ["string", "null"]}}},
    "EmbedAllResponse": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/components/schemas/Vector"}}},
    "EmbedSparseResponse": {"type": "array", "items": {"type": "array", "items": {
      "type": "object", "required": ["index", "value"],
      "properties": {"index": {"type": "integer", "minimum": 0}, "value": {"type": "number", "exclusiveMinimum": 0}}}}},
    "SimilarityRequest": {
      "type": "object", "additionalProperties": false, "required": ["inputs"],
      "properties": {
        "inputs": {"type": "object", "additionalProperties": false,
                   "required": ["source_sentence", "sentences"],
                   "properties": {"source_sentence": {"$ref": "#/components/schemas/Text"},
                                  "sentences": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Text"}}}},
        "parameters": {"type": ["object", "null"], "additionalProperties": false,
                       "description": "TEI's place for the options (huggingface_hub sends them here); or at the top level, not both",
                       "properties": {"truncate": {"type": ["boolean", "null"]},
                                      "truncation_direction": {"$ref": "#/components/schemas/TruncationDirection"},
                                      "prompt_name": {"type": ["string", "null"]}}},
        "truncate": {"type": ["boolean", "null"]},
        "truncation_direction": {"$ref": "#/components/schemas/TruncationDirection"},
        "prompt_name": {"type": ["string", "null"]}}},
    "RootRequest": {"anyOf": [{"$ref": "#/components/schemas/EmbedRequest"}, {"$ref": "#/components/schemas/SimilarityRequest"},
                              {"$ref": "#/components/schemas/PredictRequest"}, {"$ref": "#/components/schemas/RerankRequest"},
                              {"$ref": "#/components/schemas/QuestionAnsweringRequest"}]},
    "RootResponse": {"anyOf": [{"$ref": "#/components/schemas/EmbedResponse"}, {"$ref": "#/components/schemas/EmbedSparseResponse"}, {"$ref": "#/components/schemas/SimilarityResponse"},
                               {"$ref": "#/components/schemas/PredictResponse"}, {"$ref": "#/components/schemas/RerankResponse"},
                               {"$ref": "#/components/schemas/QuestionAnsweringResponse"}]},
    "SimilarityResponse": {"type": "array", "items": {"type": "number"}},
    "TokenizeRequest": {
      "type": "object", "additionalProperties": false, "required": ["inputs"],
      "properties": {
        "inputs": {"$ref": "#/components/schemas/Texts"},
        "add_special_tokens": {"type": "boolean", "default": true},
        "prompt_name": {"type": ["string", "null"]}}},
    "TokenizeResponse": {"type": "array", "items": {"type": "array", "items": {
      "type": "object", "required": ["id", "text", "special", "start", "stop"],
      "properties": {
        "id": {"type": "integer", "minimum": 0},
        "text": {"type": "string"},
        "special": {"type": "boolean"},
        "start": {"type": ["integer", "null"], "description": "byte offset in the (prompted) text; null for special tokens and vocab.txt tokenizers"},
        "stop": {"type": ["integer", "null"]}}}}},
    "DecodeRequest": {
      "type": "object", "additionalProperties": false, "required": ["ids"],
      "properties": {
        "ids": {"oneOf": [{"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                          {"type": "array", "minItems": 1, "items": {"type": "array", "items": {"type": "integer", "minimum": 0}}}]},
        "skip_special_tokens": {"const": true}}},
    "DecodeResponse": {"type": "array", "items": {"type": "string"}},
    "PredictInput": {"oneOf": [{"$ref": "#/components/schemas/Text"},
                               {"type": "array", "minItems": 1, "maxItems": 2, "items": {"$ref": "#/components/schemas/Text"}}]},
    "PredictRequest": {
      "type": "object", "additionalProperties": false, "required": ["inputs"],
      "properties": {
        "inputs": {"oneOf": [{"$ref": "#/components/schemas/PredictInput"},
                             {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"$ref": "#/components/schemas/Text"}}}]},
        "raw_scores": {"type": "boolean", "default": false},
        "truncate": {"type": ["boolean", "null"]},
        "truncation_direction": {"enum": ["Right", "right"]},
        "parameters": {"type": ["object", "null"], "additionalProperties": false,
                       "description": "the Hugging Face Inference API's text-classification parameters (huggingface_hub sends them)",
                       "properties": {"function_to_apply": {"enum": ["sigmoid", "softmax", "none", null]},
                                      "top_k": {"type": ["integer", "null"], "minimum": 1}}}}},
    "LabelScores": {"type": "array", "items": {"type": "object", "required": ["score", "label"],
                    "properties": {"score": {"type": "number"}, "label": {"type": "string"}}}},
    "PredictResponse": {"oneOf": [{"$ref": "#/components/schemas/LabelScores"},
                                  {"type": "array", "items": {"$ref": "#/components/schemas/LabelScores"}}]},
    "RerankRequest": {"oneOf": [
      {"type": "object", "additionalProperties": false, "required": ["query", "texts"],
       "properties": {
         "query": {"$ref": "#/components/schemas/Text"},
         "texts": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Text"}},
         "raw_scores": {"type": "boolean", "default": false},
         "return_text": {"type": "boolean", "default": false},
         "truncate": {"type": ["boolean", "null"]},
         "truncation_direction": {"enum": ["Right", "right"]}}},
      {"type": "object", "additionalProperties": false, "required": ["query", "documents"],
       "description": "Cohere's and Jina's shape (infinity, vLLM)",
       "properties": {
         "query": {"$ref": "#/components/schemas/Text"},
         "documents": {"type": "array", "minItems": 1, "items": {"oneOf": [
           {"$ref": "#/components/schemas/Text"},
           {"type": "object", "additionalProperties": false, "required": ["text"], "properties": {"text": {"$ref": "#/components/schemas/Text"}}}]}},
         "top_n": {"type": ["integer", "null"], "minimum": 1},
         "return_documents": {"type": "boolean", "default": false},
         "model": {"type": ["string", "null"]},
         "raw_scores": {"type": "boolean", "default": false}}}]},
    "RerankResponse": {"oneOf": [
      {"type": "array", "items": {"type": "object", "required": ["index", "score"],
        "properties": {"index": {"type": "integer"}, "score": {"type": "number"}, "text": {"type": "string"}}}},
      {"type": "object", "required": ["object", "model", "results", "usage"],
       "properties": {
         "object": {"const": "rerank"},
         "model": {"type": "string"},
         "results": {"type": "array", "items": {"type": "object", "required": ["index", "relevance_score"],
           "properties": {"index": {"type": "integer"}, "relevance_score": {"type": "number"},
                          "document": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}}},
         "usage": {"$ref": "#/components/schemas/Usage"}}}]},
    "QuestionAnsweringRequest": {
      "type": "object", "additionalProperties": false, "required": ["question", "context"],
      "properties": {
        "question": {"$ref": "#/components/schemas/Texts"},
        "context": {"$ref": "#/components/schemas/Text"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
        "max_answer_length": {"type": "integer", "minimum": 1, "maximum": 512}}},
    "Answer": {"type": "object", "required": ["answer", "score", "start", "end"],
               "properties": {"answer": {"type": "string"}, "score": {"type": "number"},
                              "start": {"type": "integer"}, "end": {"type": "integer"}}},
    "QuestionAnsweringResponse": {"oneOf": [
      {"$ref": "#/components/schemas/Answer"},
      {"type": "array", "items": {"oneOf": [{"$ref": "#/components/schemas/Answer"},
                                            {"type": "array", "items": {"$ref": "#/components/schemas/Answer"}}]}}]},
    "Info": {"type": "object", "required": ["model_id", "model_type", "max_input_length", "max_batch_tokens", "max_client_batch_size", "auto_truncate"],
             "properties": {"model_id": {"type": "string"}, "model_type": {"type": "object"},
                            "max_input_length": {"type": "integer"}, "max_batch_tokens": {"type": "integer"},
                            "max_client_batch_size": {"type": "integer"}, "max_concurrent_requests": {"type": "integer"},
                            "auto_truncate": {"type": "boolean"}, "prompts": {"type": "object", "additionalProperties": {"type": "string"}},
                            "default_prompt_name": {"type": "string"}, "description": {"type": "string"}}},
    "Models": {"type": "object", "required": ["object", "data"],
               "properties": {"object": {"const": "list"},
                              "data": {"type": "array", "items": {"type": "object", "required": ["id", "object"],
                                "properties": {"id": {"type": "string"}, "object": {"const": "model"},
                                               "created": {"type": "integer"}, "owned_by": {"type": "string"}}}}}},
    "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
    "OpenAIError": {"type": "object", "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["message", "type", "code"],
                      "properties": {"message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "integer"}}}}},
    "TEIError": {"type": "object", "required": ["error", "error_type"],
                 "properties": {"error": {"type": "string"}, "error_type": {"enum": ["Validation", "Overloaded", "Backend", "Unhealthy", "Tokenizer"]}}}
  }
})json";

json ref(const char* schema) {
  return {{"$ref", std::string("#/components/schemas/") + schema}};
}

/// The errors a route may answer: every route the token's and the
/// stopping server's; a route with a body those of its checks too.
json error_answers(const Operation& op) {
  struct Reason {
    const char* code;
    const char* why;
    bool body_only;
  };
  static constexpr Reason kReasons[] = {
      {"400", "a field is wrong or unknown (the message names it)", true},
      {"401", "the bearer token is missing or wrong", false},
      {"413", "the body, or an input's tokens with truncation off, is too large", true},
      {"415", "the body is not application/json", true},
      {"424", "the route needs another kind of model than the one served", true},
      {"429", "the queue is full: retry after Retry-After", true},
      {"503", "the server is warming up or draining", false},
  };
  const json schema = ref(op.tei ? "TEIError" : "OpenAIError");
  json out;
  for (const Reason& r : kReasons)
    if (op.request || !r.body_only)
      out[r.code] = {{"description", r.why},
                     {"content", {{"application/json", {{"schema", schema}}}}}};
  return out;
}

json operation(const Operation& op) {
  json answers = error_answers(op);
  answers["200"] = {{"description", "the answer"}};
  answers["200"]["content"] = op.answer ? json{{"application/json", {{"schema", ref(op.answer)}}}}
                                        : json{{"text/plain", {{"schema", {{"type", "string"}}}}}};
  json out{{"summary", op.summary}, {"responses", std::move(answers)}};
  if (op.request)
    out["requestBody"] = {{"required", true},
                          {"content", {{"application/json", {{"schema", ref(op.request)}}}}}};
  if (std::string_view(op.path) == "/health") out["security"] = json::array();  // no token
  return out;
}

}  // namespace

const std::string& openapi_document() {
  static const std::string document = [] {
    json doc{{"openapi", "3.1.0"},
             {"info",
              {{"title", "polyhal serve"},
               {"version", "0.1.0"},
               {"description",
                "The OpenAI embeddings API, text-embeddings-inference's routes and the "
                "Cohere/Jina rerank shape, as polyhal serve accepts and answers them "
                "(docs/serving.md). Every request body refuses a field it does not list (400, "
                "naming it). A route of another kind of model than the one served answers 424."}}},
             {"components", json::parse(kComponents)},
             {"security", json::array({{{"bearer", json::array()}}})},
             {"paths", json::object()}};
    for (const Operation& op : kOperations) doc["paths"][op.path][op.method] = operation(op);
    return doc.dump();
  }();
  return document;
}

}  // namespace polyhal::serve
