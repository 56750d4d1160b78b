#include "polyhal/app/checkpoint_store.hpp"

#include <fmt/format.h>

#include <regex>

#include "polyhal/error.hpp"

namespace polyhal {

std::filesystem::path CheckpointStore::path(std::int64_t step) const {
  return dir_ / fmt::format("checkpoint-{:08d}.safetensors", step);
}

std::optional<std::filesystem::path> CheckpointStore::latest() const {
  std::error_code ec;
  if (dir_.empty() || !std::filesystem::is_directory(dir_, ec)) return std::nullopt;
  static const std::regex pattern(R"(checkpoint-(\d{8})\.safetensors)");
  std::optional<std::filesystem::path> best;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    // Temporary files (".tmp") of an interrupted write never match.
    if (std::regex_match(entry.path().filename().string(), pattern)) {
      if (!best || entry.path().filename() > best->filename()) best = entry.path();
    }
  }
  return best;
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
  checkpoint.state = read_safetensors(file);
  return checkpoint;
}

}  // namespace polyhal
