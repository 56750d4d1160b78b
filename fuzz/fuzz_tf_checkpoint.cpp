// A TensorFlow checkpoint: the first 4 bytes (little-endian) give the length
// of PREFIX.index, the rest after it is the one shard
// PREFIX.data-00000-of-00001. Every tensor the index lists is read.
#include <cstring>
#include <string>

#include "fuzz_input.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint32_t index_size = 0;
  if (size >= 4) std::memcpy(&index_size, data, 4);
  const std::size_t body = size >= 4 ? size - 4 : 0;
  const std::size_t index_bytes = std::min<std::size_t>(index_size, body);
  const auto* start = data + (size >= 4 ? 4 : size);
  polyhal::fuzz::as_file("model.ckpt.index", start, index_bytes);
  polyhal::fuzz::as_file("model.ckpt.data-00000-of-00001", start + index_bytes, body - index_bytes);
  try {
    const polyhal::TfCheckpoint checkpoint(polyhal::fuzz::scratch_dir() / "model.ckpt");
    for (const auto& [name, entry] : checkpoint.entries()) {
      if (entry.element_bytes > 0) checkpoint.read(name);
    }
    polyhal::read_tf_bert_weights(polyhal::fuzz::scratch_dir() / "model.ckpt");
  } catch (const polyhal::Error&) {
  }
  return 0;
}
