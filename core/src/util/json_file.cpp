#include "util/json_file.hpp"

#include <fmt/format.h>

#include <fstream>

#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal::detail {

nlohmann::json read_json_value(const std::filesystem::path& file, std::uintmax_t max_bytes,
                               const char* kind) {
  refuse_special_or_oversized_file(file, max_bytes, kind);
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the {}", file.string(), kind));
  nlohmann::json json;
  try {
    json = parse_json_input(in, file.string());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  return json;
}

nlohmann::json read_json_object(const std::filesystem::path& file, std::uintmax_t max_bytes,
                                const char* kind) {
  nlohmann::json json = read_json_value(file, max_bytes, kind);
  if (!json.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object", file.string()));
  return json;
}

}  // namespace polyhal::detail
