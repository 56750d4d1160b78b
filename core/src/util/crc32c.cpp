#include "util/crc32c.hpp"

#include <nmmintrin.h>
#include <array>
#include <cstring>

namespace polyhal::detail {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    table[i] = crc;
  }
  return table;
}

constexpr auto kTable = make_table();

std::uint32_t extend_portable(std::uint32_t crc, const unsigned char* p, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc,
                                                             const unsigned char* p,
                                                             std::size_t size) {
  std::uint64_t wide = crc;
  for (; size >= 8; p += 8, size -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  auto narrow = static_cast<std::uint32_t>(wide);
  for (; size > 0; ++p, --size) narrow = _mm_crc32_u8(narrow, *p);
  return narrow;
}

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = hardware ? extend_sse42(crc, p, size) : extend_portable(crc, p, size);
  return ~crc;
}

}  // namespace polyhal::detail
