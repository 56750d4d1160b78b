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
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// The largest step a checkpoint may say: far beyond any run, far below
/// where step arithmetic (step x batch) overflows.
inline constexpr std::int64_t kMaxCheckpointStep = std::int64_t{1} << 40;

/// Refuses training state no run can continue from: a NaN or infinity in
/// any tensor, or a negative second moment (tensors "optimizer.v.*");
/// ConfigError naming the file, the tensor and the element.
void check_state_values(const std::filesystem::path& file, const TensorMap& state);

class CheckpointStore {
 public:
  /// An empty `dir` stores nothing (enabled() is false).
  explicit CheckpointStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  bool enabled() const noexcept { return !dir_.empty(); }
  const std::filesystem::path& dir() const noexcept { return dir_; }
  /// Where the checkpoint of optimizer step `step` goes.
  std::filesystem::path path(std::int64_t step) const;
  /// The newest complete checkpoint, if any (temporary files never match);
  /// none when the directory does not exist. ConfigError when it exists but
  /// cannot be listed (taken for empty, the run would overwrite it).
  std::optional<std::filesystem::path> latest() const;
  /// Removes the temporary files of checkpoint writes that were killed
  /// (checkpoint-N.safetensors.tmp.XXXXXX); call only while holding the
  /// directory's lock, so no write of another run is in flight. Returns them.
  std::vector<std::filesystem::path> remove_stale_temporaries() const;
  /// Removes all but the newest `keep` complete checkpoints (keep >= 1), as
  /// the run that holds the directory's lock writes a new one; returns them.
  std::vector<std::filesystem::path> remove_all_but_newest(std::int64_t keep) const;
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
  /// valid step in its metadata, a step over kMaxCheckpointStep or other
  /// than its name says, or a value check_state_values refuses.
  static Checkpoint load(const std::filesystem::path& file);

 private:
  std::filesystem::path dir_;
};

}  // namespace polyhal
