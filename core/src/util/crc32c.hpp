#pragma once
// CRC-32C (Castagnoli), as TensorFlow checks its checkpoints and TFRecord
// files with it, and the "masked" form those files store (a rotation plus a
// constant, so a CRC of data that holds CRCs stays meaningful).
#include <cstddef>
#include <cstdint>

namespace polyhal::detail {

/// Extends `crc` (0 to start) over `size` bytes; SSE4.2's crc32 instruction
/// where the CPU has it.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);

inline std::uint32_t crc32c(const void* data, std::size_t size) {
  return crc32c_extend(0, data, size);
}

/// TensorFlow's (and LevelDB's) masked CRC.
inline std::uint32_t mask_crc32c(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace polyhal::detail
