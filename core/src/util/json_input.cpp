// Untrusted JSON parsed with its nesting capped (json_input.hpp): the
// parser's callback sees each value's depth as it opens, so a deep value is
// refused before it is built.
#include "polyhal/app/json_input.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

template <class Input>
nlohmann::json parse_capped(Input&& input, const std::string& where) {
  const nlohmann::json::parser_callback_t cap = [&](int depth, nlohmann::json::parse_event_t,
                                                    nlohmann::json&) {
    if (depth >= kMaxJsonDepth)  // depth counts from 0: the 65th level is 64
      throw ConfigError(fmt::format("{}: JSON nested deeper than {} levels", where, kMaxJsonDepth));
    return true;
  };
  return nlohmann::json::parse(std::forward<Input>(input), cap);
}

}  // namespace

nlohmann::json parse_json_input(std::string_view text, const std::string& where) {
  return parse_capped(text, where);
}

nlohmann::json parse_json_input(std::istream& in, const std::string& where) {
  return parse_capped(in, where);
}

nlohmann::json parse_json_input_or_discarded(std::string_view text) {
  try {
    return parse_capped(text, std::string());
  } catch (const ConfigError&) {
  } catch (const nlohmann::json::exception&) {
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace polyhal
