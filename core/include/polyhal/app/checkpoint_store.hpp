#pragma once
/// @file checkpoint_store.hpp
/// Training checkpoints in one directory: checkpoint-NNNNNNNN.safetensors,
/// each written to a temporary file, synced and renamed (write_safetensors),
/// so a killed run never leaves a half-written checkpoint under that name.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/safetensors.hpp"

namespace polyhal {

class CheckpointStore {
 public:
  /// An empty `dir` stores nothing (enabled() is false).
  explicit CheckpointStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  bool enabled() const noexcept { return !dir_.empty(); }
  const std::filesystem::path& dir() const noexcept { return dir_; }
  /// Where the checkpoint of optimizer step `step` goes.
  std::filesystem::path path(std::int64_t step) const;
  /// The newest complete checkpoint, if any (temporary files never match).
  std::optional<std::filesystem::path> latest() const;
  /// Writes the state of step `step` with `metadata` (plus "step"); returns its path.
  std::filesystem::path save(std::int64_t step, const TensorMap& state,
                             std::map<std::string, std::string> metadata) const;

  struct Checkpoint {
    std::filesystem::path path;
    std::int64_t step = 0;
    TensorMap state;
    std::map<std::string, std::string> metadata;
  };
  /// Reads a checkpoint; throws ConfigError naming the file when it has no
  /// valid step in its metadata.
  static Checkpoint load(const std::filesystem::path& file);

 private:
  std::filesystem::path dir_;
};

}  // namespace polyhal
