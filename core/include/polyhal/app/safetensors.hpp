#pragma once
/// @file safetensors.hpp
/// The safetensors format: an 8-byte little-endian header length, a JSON
/// header {name: {dtype, shape, data_offsets}}, then the raw data.
/// Reading converts F32, BF16 and F16 to f32 on the host.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/dtype.hpp"
#include "polyhal/tensor.hpp"

namespace polyhal {

/// A host tensor in f32, as read from or written to a file.
struct HostTensor {
  Shape shape;
  std::vector<float> values;
};

using TensorMap = std::map<std::string, HostTensor>;

/// Reads every tensor. Throws ConfigError naming the file and the tensor or
/// byte offset for a truncated file, a bad header, offsets outside the data,
/// a size that does not match dtype x shape, or an unsupported dtype.
TensorMap read_safetensors(const std::filesystem::path& file);

/// Writes tensors with `dtype` (f32, bf16 or f16), atomically: a temporary
/// file is written, flushed and fsynced, then renamed over `file`, so a crash
/// at any moment leaves either the old file or the new one, never half of one.
/// `metadata` goes into the header's "__metadata__" (string values).
void write_safetensors(const TensorMap& tensors, DType dtype, const std::filesystem::path& file,
                       const std::map<std::string, std::string>& metadata = {});

/// The "__metadata__" strings of a safetensors file (empty if none).
std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& file);

/// Each tensor's shape from the header alone (no tensor data is read):
/// what a file holds, checked before loading it.
std::map<std::string, std::vector<std::int64_t>> read_safetensors_shapes(
    const std::filesystem::path& file);

}  // namespace polyhal
