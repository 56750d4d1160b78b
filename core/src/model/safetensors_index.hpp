#pragma once
// A sharded Hugging Face checkpoint: model.safetensors.index.json maps each
// tensor to the shard holding it (model-00001-of-00002.safetensors, ...),
// as save_pretrained writes models over its max_shard_size. The index is
// checked against the shards: every tensor it names is in its shard, every
// tensor of a shard is named for that shard, none is in two, and a shard is
// a file beside the index (never a path elsewhere).
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace polyhal {

/// Whether `file` is an index (its name ends in .safetensors.index.json).
bool is_safetensors_index(const std::filesystem::path& file);

/// The shards the index names, in order, each with the tensors it holds.
/// Throws ConfigError naming the index and key for a malformed index.
std::map<std::filesystem::path, std::vector<std::string>> safetensors_index_shards(
    const std::filesystem::path& index);

/// Refuses a shard whose tensors differ from what the index says it holds,
/// naming the index, the shard and a tensor.
void check_safetensors_shard(const std::filesystem::path& index, const std::filesystem::path& shard,
                             const std::vector<std::string>& expected,
                             const std::vector<std::string>& holds);

}  // namespace polyhal
