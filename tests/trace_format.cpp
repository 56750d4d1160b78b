#include "trace_format.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace polyhal::test {

namespace {

// Timestamps are microseconds printed as doubles: allow for their rounding.
constexpr double kSlack = 1e-3;

}  // namespace

nlohmann::json read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> trace_slices(const nlohmann::json& trace) {
  std::vector<nlohmann::json> slices;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "X") slices.push_back(e);
  return slices;
}

std::map<int, std::string> trace_track_names(const nlohmann::json& trace) {
  std::map<int, std::string> names;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
      names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
  return names;
}

std::vector<std::string> trace_format_problems(const nlohmann::json& trace) {
  std::vector<std::string> problems;
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return {"not an object with a traceEvents array"};
  if (trace.contains("displayTimeUnit") && trace["displayTimeUnit"] != "ms" &&
      trace["displayTimeUnit"] != "ns")
    problems.push_back("displayTimeUnit is neither ms nor ns");
  std::set<std::pair<int, int>> named;
  std::set<int> processes_named;
  // Per (pid, tid): the open slices' ends, innermost last.
  std::map<std::pair<int, int>, std::vector<double>> open;
  std::map<std::pair<int, int>, double> last_start;
  std::size_t index = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string where = fmt::format("event {}", index++);
    if (!e.is_object()) {
      problems.push_back(where + ": not an object");
      continue;
    }
    for (const char* key : {"name", "ph"})
      if (!e.contains(key) || !e[key].is_string())
        problems.push_back(fmt::format("{}: '{}' missing or not a string", where, key));
    for (const char* key : {"pid", "tid"})
      if (!e.contains(key) || !e[key].is_number_integer())
        problems.push_back(fmt::format("{}: '{}' missing or not an integer", where, key));
    if (!problems.empty() && problems.back().starts_with(where)) continue;
    const std::pair track{e["pid"].get<int>(), e["tid"].get<int>()};
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (!e.contains("args") || !e["args"].is_object())
        problems.push_back(where + ": metadata without args");
      else if (e["name"] == "thread_name")
        named.insert(track);
      else if (e["name"] == "process_name")
        processes_named.insert(track.first);
      continue;
    }
    if (ph != "X") {
      problems.push_back(fmt::format("{}: phase '{}' (polyhal writes X and M only)", where, ph));
      continue;
    }
    if (!e.contains("cat") || !e["cat"].is_string())
      problems.push_back(where + ": 'cat' missing or not a string");
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) {
      problems.push_back(where + ": 'ts' or 'dur' missing or not a number");
      continue;
    }
    if (e.contains("args") && !e["args"].is_object())
      problems.push_back(where + ": 'args' is not an object");
    const double ts = e["ts"], dur = e["dur"];
    if (ts < 0 || dur < 0) problems.push_back(where + ": negative ts or dur");
    if (!named.contains(track))
      problems.push_back(fmt::format("{}: track {}/{} has no thread_name before its slices", where,
                                     track.first, track.second));
    if (auto it = last_start.find(track); it != last_start.end() && ts + kSlack < it->second)
      problems.push_back(fmt::format("{} '{}': starts before the previous slice of its track",
                                     where, e["name"].get<std::string>()));
    last_start[track] = ts;
    auto& stack = open[track];
    while (!stack.empty() && stack.back() <= ts + kSlack) stack.pop_back();
    if (!stack.empty() && ts + dur > stack.back() + kSlack)
      problems.push_back(fmt::format(
          "{} '{}' [{}, {}] overlaps the slice it starts in (which ends at {}) on track {}/{}",
          where, e["name"].get<std::string>(), ts, ts + dur, stack.back(), track.first,
          track.second));
    stack.push_back(ts + dur);
  }
  for (const auto& [pid, tid] : named)
    if (!processes_named.contains(pid))
      problems.push_back(fmt::format("process {} has no process_name", pid));
  return problems;
}

}  // namespace polyhal::test
