#pragma once
// A small JSON file read whole, refused before parsing when it is not a
// regular file or larger than its kind may be.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace polyhal::detail {

/// The JSON object in `file`. ConfigError naming the file for a special or
/// oversized file (more than `max_bytes`), invalid JSON, or a value that is
/// not an object; `kind` ("tokenizer config") names what the file is.
nlohmann::json read_json_object(const std::filesystem::path& file, std::uintmax_t max_bytes,
                                const char* kind);
/// The same for a value of any type (modules.json is a list).
nlohmann::json read_json_value(const std::filesystem::path& file, std::uintmax_t max_bytes,
                               const char* kind);

}  // namespace polyhal::detail
