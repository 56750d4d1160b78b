#pragma once
/// @file json_input.hpp
/// JSON from outside (a model's config.json, a safetensors header, a
/// tokenizer.json, SQuAD files, metrics and recipe records) parsed with its
/// nesting capped: a value nested thousands deep would crash whatever walks
/// it recursively (printing it in a message, a report cell), so it is
/// refused while it is read.
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// The deepest nesting any file polyhal reads has (tokenizer.json: under 10).
inline constexpr int kMaxJsonDepth = 64;

/// What a parse did, counted rather than timed: one event per value, key and
/// closed container (a test holds it proportional to the input's size).
struct JsonReadWork {
  std::size_t events = 0;
};

/// Parses `text` (or `in`) in time linear in its size. Throws ConfigError
/// "<where>: JSON nested deeper than 64 levels" for a deeper value, and
/// nlohmann::json::parse_error for a syntax error, as nlohmann::json::parse
/// does.
nlohmann::json parse_json_input(std::string_view text, const std::string& where,
                                JsonReadWork* work = nullptr);
nlohmann::json parse_json_input(std::istream& in, const std::string& where);

/// The value, or a discarded one (is_discarded()) when `text` is not valid
/// JSON or is nested too deep.
nlohmann::json parse_json_input_or_discarded(std::string_view text);

/// `value` as JSON text of at most `max_chars` characters (then "..."): for
/// messages about untrusted values, which are never printed whole. It walks
/// only as much of `value` as it prints, so its cost and its recursion are
/// bounded by `max_chars`, whatever the value's size or depth.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 80);

}  // namespace polyhal
