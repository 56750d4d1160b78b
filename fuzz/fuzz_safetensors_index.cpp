// A sharded checkpoint (model.safetensors.index.json and its shards): the
// part before the first NUL byte is the index, the rest the one shard
// beside it (model-00001-of-00001.safetensors), which the index may name or
// not; read whole, by shapes and by metadata.
#include <algorithm>
#include <string>

#include "fuzz_input.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto cut = std::min(input.find('\0'), input.size());
  const std::string index = input.substr(0, cut);
  const std::string shard = cut < input.size() ? input.substr(cut + 1) : std::string();
  const auto file =
      polyhal::fuzz::as_file("model.safetensors.index.json",
                             reinterpret_cast<const std::uint8_t*>(index.data()), index.size());
  polyhal::fuzz::as_file("model-00001-of-00001.safetensors",
                         reinterpret_cast<const std::uint8_t*>(shard.data()), shard.size());
  try {
    polyhal::read_safetensors(file);
  } catch (const polyhal::Error&) {
  }
  try {
    polyhal::read_safetensors_shapes(file);
  } catch (const polyhal::Error&) {
  }
  try {
    polyhal::read_safetensors_metadata(file);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
