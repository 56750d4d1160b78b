// Untrusted JSON parsed with its nesting capped (json_input.hpp), in linear
// time: nlohmann's SAX parser (iterative) feeds a DOM builder of ours that
// counts the depth as each container opens, so a deep value is refused
// before it is built. (nlohmann's callback parser, used before, rescans the
// enclosing container for discarded values after every closed child, which
// made a 20,000-entry header quadratic.)
#include "polyhal/app/json_input.hpp"

#include <fmt/format.h>

#include <iterator>
#include <vector>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

using nlohmann::json;

/// Builds the value the SAX events describe; O(1) work per event.
class CappedDomBuilder {
 public:
  CappedDomBuilder(const std::string& where, JsonReadWork* work) : where_(where), work_(work) {}

  json take() { return std::move(root_); }

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(json(v)); }
  bool string(json::string_t& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    count();
    key_ = std::move(k);
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;  // as nlohmann::json::parse: parse_error, out_of_range (a number too large)
  }

 private:
  void count() {
    if (work_) ++work_->events;
  }

  /// Places `value` in the open container (or as the root); returns where it went.
  json* place(json&& value) {
    count();
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& top = *open_.back();
    if (top.is_array()) {
      // Only the innermost container grows, so the pointers to its
      // ancestors (elements of containers that do not change) stay valid.
      top.get_ref<json::array_t&>().push_back(std::move(value));
      return &top.get_ref<json::array_t&>().back();
    }
    json& slot = top.get_ref<json::object_t&>()[key_];  // a repeated key: the last wins
    slot = std::move(value);
    return &slot;
  }
  bool put(json&& value) {
    place(std::move(value));
    return true;
  }
  bool open(json&& container) {
    // Depth counts the containers open around this one: the 65th level is refused.
    if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      throw ConfigError(
          fmt::format("{}: JSON nested deeper than {} levels", where_, kMaxJsonDepth));
    open_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    count();
    open_.pop_back();
    return true;
  }

  const std::string& where_;
  JsonReadWork* work_;
  json root_;
  std::vector<json*> open_;
  json::string_t key_;
};

template <class Input>
json parse_capped(Input&& input, const std::string& where, JsonReadWork* work) {
  CappedDomBuilder builder(where, work);
  json::sax_parse(std::forward<Input>(input), &builder);
  return builder.take();
}

/// Appends at most `budget` characters of `value` to `out`; recursion ends
/// when the budget does, so an excerpt never walks deeper than it prints.
void append_excerpt(const json& value, std::string& out, std::size_t budget) {
  if (out.size() >= budget) return;
  if (value.is_string()) {
    const auto& s = value.get_ref<const json::string_t&>();
    out += json(s.substr(0, budget - out.size() + 1))
               .dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  if (!value.is_structured()) {
    out += value.dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  const bool array = value.is_array();
  out += array ? '[' : '{';
  bool first = true;
  for (auto it = value.begin(); it != value.end() && out.size() < budget; ++it) {
    if (!first) out += ',';
    first = false;
    if (!array) out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + ':';
    append_excerpt(it.value(), out, budget);
  }
  out += array ? ']' : '}';
}

}  // namespace

json parse_json_input(std::string_view text, const std::string& where, JsonReadWork* work) {
  return parse_capped(text, where, work);
}

json parse_json_input(std::istream& in, const std::string& where) {
  return parse_capped(in, where, nullptr);
}

json parse_json_input_or_discarded(std::string_view text) {
  try {
    return parse_capped(text, std::string(), nullptr);
  } catch (const ConfigError&) {
  } catch (const json::exception&) {
  }
  return json(json::value_t::discarded);
}

std::string json_excerpt(const json& value, std::size_t max_chars) {
  std::string text;
  append_excerpt(value, text, max_chars);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace polyhal
