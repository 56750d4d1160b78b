#include "model/safetensors_index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"
#include "util/json_file.hpp"

namespace polyhal {
namespace {

// A 100 B-parameter model's index is about 2 MB.
constexpr std::uintmax_t kMaxIndexBytes = std::uintmax_t{16} << 20;
constexpr std::size_t kMaxShards = 100'000;
constexpr std::string_view kIndexSuffix = ".safetensors.index.json";

}  // namespace

bool is_safetensors_index(const std::filesystem::path& file) {
  return file.filename().string().ends_with(kIndexSuffix);
}

std::map<std::filesystem::path, std::vector<std::string>> safetensors_index_shards(
    const std::filesystem::path& index) {
  const auto json = detail::read_json_object(index, kMaxIndexBytes, "safetensors index");
  const auto map = json.find("weight_map");
  if (map == json.end() || !map->is_object() || map->empty())
    throw ConfigError(fmt::format("{}: key 'weight_map': expected an object of tensor: shard file",
                                  index.string()));
  std::map<std::filesystem::path, std::vector<std::string>> shards;
  for (const auto& entry : map->items()) {
    if (!entry.value().is_string())
      throw ConfigError(fmt::format("{}: key 'weight_map.{}': expected a shard's file name, got {}",
                                    index.string(), entry.key(), json_excerpt(entry.value())));
    const std::string shard = entry.value().get<std::string>();
    // A shard is a file beside the index: never a path that leaves its directory.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == ".." ||
        !shard.ends_with(".safetensors"))
      throw ConfigError(fmt::format(
          "{}: key 'weight_map.{}': '{}' is not a .safetensors file name beside the index",
          index.string(), entry.key(), shard.substr(0, 200)));
    shards[index.parent_path() / shard].push_back(entry.key());
    if (shards.size() > kMaxShards)
      throw ConfigError(fmt::format("{}: more than {} shards", index.string(), kMaxShards));
  }
  for (auto& [shard, names] : shards) std::sort(names.begin(), names.end());
  return shards;
}

void check_safetensors_shard(const std::filesystem::path& index, const std::filesystem::path& shard,
                             const std::vector<std::string>& expected,
                             const std::vector<std::string>& holds) {
  const std::set<std::string> want(expected.begin(), expected.end());
  const std::set<std::string> has(holds.begin(), holds.end());
  for (const auto& name : want)
    if (!has.contains(name))
      throw ConfigError(fmt::format("{}: tensor '{}' is mapped to {}, which does not hold it",
                                    index.string(), name, shard.string()));
  for (const auto& name : has)
    if (!want.contains(name))
      throw ConfigError(
          fmt::format("{}: {} holds tensor '{}', which the index maps elsewhere or "
                      "not at all",
                      index.string(), shard.string(), name));
}

}  // namespace polyhal
