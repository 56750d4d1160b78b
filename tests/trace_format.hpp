#pragma once
// Checks a file against the Chrome trace-event format as polyhal writes it
// (the JSON object form): every event's fields and types, metadata naming
// every track, and on each track slices that nest or follow each other,
// never partly overlap.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace polyhal::test {

/// The problems found in `trace` (empty: it is well formed).
std::vector<std::string> trace_format_problems(const nlohmann::json& trace);
/// The JSON object in `file`.
nlohmann::json read_trace(const std::filesystem::path& file);
/// The complete ("X") events of `trace`.
std::vector<nlohmann::json> trace_slices(const nlohmann::json& trace);
/// Track id -> its name (thread_name metadata).
std::map<int, std::string> trace_track_names(const nlohmann::json& trace);

}  // namespace polyhal::test
