#include "polyhal/app/checkpoint_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <vector>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// The step a checkpoint's name holds (checkpoint-NNNNNNNN.safetensors,
/// 8 to 18 digits: an int64 step never overflows).
std::int64_t step_of(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  return std::stoll(name.substr(std::string_view("checkpoint-").size()));
}

}  // namespace

std::filesystem::path CheckpointStore::path(std::int64_t step) const {
  return dir_ / fmt::format("checkpoint-{:08d}.safetensors", step);
}

std::optional<std::filesystem::path> CheckpointStore::latest() const {
  if (dir_.empty()) return std::nullopt;
  std::error_code ec;
  const auto status = std::filesystem::status(dir_, ec);
  if (status.type() == std::filesystem::file_type::not_found) return std::nullopt;
  // Any other failure to list it must stop the run: taken for "no
  // checkpoints", it would restart at step 1 and overwrite them.
  const auto cannot_list = [&](const std::error_code& error) {
    return ConfigError(
        fmt::format("checkpoint.dir {}: cannot list it ({}); a run that cannot see "
                    "its checkpoints would start over and overwrite them",
                    dir_.string(), error.message()));
  };
  if (ec) throw cannot_list(ec);
  if (!std::filesystem::is_directory(status))
    throw ConfigError(fmt::format("checkpoint.dir {}: not a directory", dir_.string()));
  static const std::regex pattern(R"(checkpoint-(\d{8,18})\.safetensors)");
  std::optional<std::filesystem::path> best;
  std::filesystem::directory_iterator entry(dir_, ec);
  if (ec) throw cannot_list(ec);
  for (; entry != std::filesystem::directory_iterator(); entry.increment(ec)) {
    // Temporary files (".tmp") of an interrupted write never match.
    if (std::regex_match(entry->path().filename().string(), pattern)) {
      if (!best || step_of(entry->path()) > step_of(*best)) best = entry->path();
    }
  }
  if (ec) throw cannot_list(ec);
  return best;
}

std::vector<std::filesystem::path> CheckpointStore::remove_stale_temporaries() const {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  if (dir_.empty() || !std::filesystem::is_directory(dir_, ec)) return removed;
  // Only what a checkpoint write of ours leaves (mkstemp's six characters).
  static const std::regex temporary(R"(checkpoint-\d{8,18}\.safetensors\.tmp\.[A-Za-z0-9]{6})");
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (!std::regex_match(entry.path().filename().string(), temporary)) continue;
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
    if (std::filesystem::remove(entry.path(), ec)) removed.push_back(entry.path());
  }
  return removed;
}

std::vector<std::filesystem::path> CheckpointStore::remove_all_but_newest(std::int64_t keep) const {
  std::vector<std::filesystem::path> found, removed;
  std::error_code ec;
  if (dir_.empty() || keep < 1 || !std::filesystem::is_directory(dir_, ec)) return removed;
  static const std::regex pattern(R"(checkpoint-(\d{8,18})\.safetensors)");
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec))
    if (std::regex_match(entry.path().filename().string(), pattern) && entry.is_regular_file(ec) &&
        !entry.is_symlink(ec))
      found.push_back(entry.path());
  // By step: past 8 digits the names no longer sort as the steps do.
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return step_of(a) < step_of(b); });
  const auto extra = static_cast<std::int64_t>(found.size()) - keep;
  for (std::int64_t i = 0; i < extra; ++i)
    if (std::filesystem::remove(found[static_cast<std::size_t>(i)], ec))
      removed.push_back(found[static_cast<std::size_t>(i)]);
  return removed;
}

std::filesystem::path CheckpointStore::save(std::int64_t step, const TensorMap& state,
                                            std::map<std::string, std::string> metadata) const {
  std::filesystem::create_directories(dir_);
  const auto file = path(step);
  metadata["step"] = std::to_string(step);
  write_safetensors(state, DType::f32, file, metadata);
  return file;
}

CheckpointStore::Checkpoint CheckpointStore::load(const std::filesystem::path& file) {
  Checkpoint checkpoint;
  checkpoint.path = file;
  checkpoint.metadata = read_safetensors_metadata(file);
  const auto it = checkpoint.metadata.find("step");
  if (it == checkpoint.metadata.end())
    throw ConfigError(fmt::format("{}: checkpoint has no step in its metadata", file.string()));
  try {
    std::size_t used = 0;
    checkpoint.step = std::stoll(it->second, &used);
    if (used != it->second.size() || checkpoint.step < 0) throw std::invalid_argument(it->second);
  } catch (const std::exception&) {
    throw ConfigError(
        fmt::format("{}: checkpoint step \"{}\" is not a step number", file.string(), it->second));
  }
  if (checkpoint.step > kMaxCheckpointStep)
    throw ConfigError(fmt::format("{}: checkpoint step {} is beyond any run (at most {})",
                                  file.string(), checkpoint.step, kMaxCheckpointStep));
  // The name says the step too: a checkpoint whose metadata disagrees was
  // renamed or written by something else, and would overwrite good ones.
  static const std::regex named(R"(checkpoint-(\d{8,18})\.safetensors)");
  std::smatch match;
  const std::string name = file.filename().string();
  if (std::regex_match(name, match, named) && std::stoll(match[1].str()) != checkpoint.step)
    throw ConfigError(fmt::format("{}: its name says step {} but its metadata step {}",
                                  file.string(), std::stoll(match[1].str()), checkpoint.step));
  checkpoint.state = read_safetensors(file);
  check_state_values(file, checkpoint.state);
  return checkpoint;
}

void check_state_values(const std::filesystem::path& file, const TensorMap& state) {
  for (const auto& [name, tensor] : state) {
    // Adam's and LAMB's second moment is a running mean of squares.
    const bool second_moment = name.starts_with("optimizer.v.");
    for (std::size_t i = 0; i < tensor.values.size(); ++i) {
      const float x = tensor.values[i];
      if (!std::isfinite(x))
        throw ConfigError(
            fmt::format("{}: tensor '{}' holds {} at element {}: a checkpoint of a "
                        "run that diverged; resume from an earlier one",
                        file.string(), name, x, i));
      if (second_moment && x < 0.0f)
        throw ConfigError(
            fmt::format("{}: tensor '{}' holds {} at element {}: a second moment is never negative",
                        file.string(), name, x, i));
    }
  }
}

}  // namespace polyhal
