#pragma once
/// @file tf_checkpoint.hpp
/// TensorFlow checkpoints (tensor bundles), read directly: PREFIX.index, a
/// sorted table of one record per tensor, and the shards
/// PREFIX.data-NNNNN-of-MMMMM holding the bytes. Everything the index says
/// is checked against the files before it is used (shard numbers, offsets,
/// sizes against dtype x shape, CRC-32C of every tensor read).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// True when `path` names a TensorFlow checkpoint: its prefix (with
/// PREFIX.index beside it) or the .index file itself.
bool is_tf_checkpoint(const std::filesystem::path& path);

/// The TensorFlow checkpoints in `dir` (prefixes of its *.index files),
/// sorted: Google's released models hold one, bert_model.ckpt.
std::vector<std::filesystem::path> tf_checkpoints_in(const std::filesystem::path& dir);

/// The one TensorFlow checkpoint in `dir`, as a prefix. ConfigError naming
/// `dir` when it holds none, or several: then naming them and saying to give
/// one `where` ("as --input", "as checkpoint.init").
std::filesystem::path tf_checkpoint_in(const std::filesystem::path& dir, const std::string& where);

/// One tensor's record in the index.
struct TfTensorEntry {
  std::string dtype;  ///< TensorFlow's name: "float", "bfloat16", "half", "int32", "int64", ...
  Shape shape;
  std::int32_t shard = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t masked_crc32c = 0;
  /// Bytes per element; 0 for a dtype polyhal does not read (string, bool, ...).
  std::size_t element_bytes = 0;
};

class TfCheckpoint {
 public:
  /// Reads and checks the index of the checkpoint `path` names (prefix or
  /// .index file); the shards must exist and be large enough for every
  /// record. A TF2 object-based checkpoint (keys such as
  /// "model/layer/0/kernel/.ATTRIBUTES/VARIABLE_VALUE") is read through its
  /// object graph: each variable is then named as it was created
  /// ("bert/encoder/layer_0/attention/self/query/kernel"), an optimizer slot
  /// by its variable's name and the slot's ("/adam_m" for m, "/adam_v" for
  /// v), so both kinds read alike. Throws ConfigError naming the file and
  /// what is wrong.
  explicit TfCheckpoint(const std::filesystem::path& path);

  const std::filesystem::path& prefix() const noexcept { return prefix_; }
  /// Every tensor, by TensorFlow name.
  const std::map<std::string, TfTensorEntry>& entries() const noexcept { return entries_; }
  /// The tensor's values as f32, after checking its CRC-32C. Throws
  /// ConfigError naming the shard, the tensor and the byte offset.
  HostTensor read(const std::string& name) const;
  /// Scalar `name` (global_step) as an exact step count: integers as they
  /// are, floats only when whole; ConfigError naming the file and tensor
  /// for a negative, fractional or non-scalar value, or one of 1e18 or more.
  std::int64_t read_step(const std::string& name) const;

 private:
  std::string checked_bytes(const std::string& name, const TfTensorEntry& entry) const;
  std::string read_string(const std::string& name, const TfTensorEntry& entry) const;
  void name_by_object_graph();
  std::filesystem::path prefix_;
  std::vector<std::filesystem::path> shards_;
  std::map<std::string, TfTensorEntry> entries_;
};

}  // namespace polyhal
