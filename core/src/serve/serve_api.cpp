// The serving APIs' bodies (serve_api.hpp): parsed with nlohmann::json, whose
// parser refuses invalid UTF-8, then checked key by key.
#include "polyhal/app/serve_api.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace polyhal {
namespace {

using nlohmann::json;

json parse_object(std::string_view body) {
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
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
  EmbedRequest out;
  out.inputs = texts(doc, "input", limits);
  if (const auto it = doc.find("model"); it != doc.end() && !it->is_null()) {
    if (!it->is_string())
      throw ApiError(400, fmt::format("'model' is {}, expected a string", type_name(*it)));
    out.model = it->get<std::string>();
  }
  if (const auto it = doc.find("encoding_format"); it != doc.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      throw ApiError(400, fmt::format("'encoding_format' is {}: expected \"float\" or \"base64\"",
                                      it->dump()));
    out.base64 = *it == "base64";
  }
  if (const auto it = doc.find("dimensions"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() != limits.dimensions)
      throw ApiError(400, fmt::format("'dimensions' is {}: this model's embeddings have {} "
                                      "dimensions and it was not trained for fewer; leave it out "
                                      "or give {}",
                                      it->dump(), limits.dimensions, limits.dimensions));
  }
  if (const auto it = doc.find("user"); it != doc.end() && !it->is_null() && !it->is_string())
    throw ApiError(400, fmt::format("'user' is {}, expected a string", type_name(*it)));
  return out;
}

EmbedRequest parse_tei_embed(std::string_view body, const ApiLimits& limits) {
  const json doc = parse_object(body);
  EmbedRequest out;
  out.inputs = texts(doc, "inputs", limits);
  out.normalize = optional_bool(doc, "normalize").value_or(true);
  out.truncate = optional_bool(doc, "truncate");
  if (const auto it = doc.find("truncation_direction"); it != doc.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "Right" && *it != "right"))
      throw ApiError(
          400, fmt::format("'truncation_direction' is {}: only \"Right\" is served", it->dump()));
  }
  return out;
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

std::string openai_embeddings_answer(const std::vector<std::vector<float>>& embeddings, bool base64,
                                     const std::string& model, std::int64_t tokens) {
  json data = json::array();
  for (std::size_t i = 0; i < embeddings.size(); ++i) {
    json item{{"object", "embedding"}, {"index", i}};
    if (base64) {
      const auto& e = embeddings[i];
      std::vector<std::uint8_t> bytes(e.size() * sizeof(float));
      std::memcpy(bytes.data(), e.data(), bytes.size());  // x86-64: little-endian already
      item["embedding"] = base64_encode(bytes);
    } else {
      item["embedding"] = embeddings[i];
    }
    data.push_back(std::move(item));
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
      .dump();
}

std::string tei_embed_answer(const std::vector<std::vector<float>>& embeddings) {
  return json(embeddings).dump();
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
