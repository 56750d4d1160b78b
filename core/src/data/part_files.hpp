#pragma once
// Part files named "part-NNNNN-of-MMMMM" (as `polyhal pack` and
// `prepare-data` write them, and the seeds' scripts for HDF5 and TFRecord)
// say how many make the set: a set cut short (a full disk, a copy stopped
// part way) must not pass for the whole data. Header-only: the core's
// readers and the HDF5 module share it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "polyhal/error.hpp"

namespace polyhal::detail {

/// Throws ConfigError naming `dir` when the part files among `paths` are of
/// two sets, or their set lacks a part (the first five missing named).
inline void check_part_set(const std::filesystem::path& dir,
                           const std::vector<std::filesystem::path>& paths) {
  static const std::regex part(R"(part-(\d{1,9})-of-(\d{1,9})(\.|$))");
  std::optional<long long> total;
  std::set<long long> present;
  for (const auto& file : paths) {
    std::smatch match;
    const std::string name = file.filename().string();
    if (!std::regex_search(name, match, part)) continue;
    const long long index = std::stoll(match[1].str()), of = std::stoll(match[2].str());
    if (total && *total != of)
      throw ConfigError(fmt::format("{}: part files of two sets ({} parts and {} parts)",
                                    dir.string(), *total, of));
    total = of;
    present.insert(index);
  }
  if (!total) return;
  std::vector<long long> missing;
  for (long long index = 0; index < *total && missing.size() < 5; ++index)
    if (!present.contains(index)) missing.push_back(index);
  if (!missing.empty())
    throw ConfigError(fmt::format(
        "{}: {} of {} part files: the set is incomplete (missing part {}{}); was writing it "
        "stopped? Write it again",
        dir.string(), present.size(), *total, fmt::join(missing, ", "),
        present.size() + missing.size() < static_cast<std::size_t>(*total) ? ", ..." : ""));
}

}  // namespace polyhal::detail
