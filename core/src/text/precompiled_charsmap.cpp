#include "text/precompiled_charsmap.hpp"

#include <fmt/format.h>

#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal::text {
namespace {

// darts-clone's DoubleArrayUnit fields.
bool has_leaf(std::uint32_t unit) {
  return ((unit >> 8) & 1) != 0;
}
std::uint32_t value_of(std::uint32_t unit) {
  return unit & ((1U << 31) - 1);
}
std::uint32_t label_of(std::uint32_t unit) {
  return unit & ((1U << 31) | 0xFF);
}
std::uint32_t offset_of(std::uint32_t unit) {
  return (unit >> 10) << ((unit & (1U << 9)) >> 6);
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const int v = base64_value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  if (count >= 6) return std::nullopt;  // a lone sextet is no byte
  return out;
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string blob, const std::string& where) {
  if (blob.size() < 4)
    throw ConfigError(fmt::format("{}: the compiled character map has no trie size", where));
  const auto byte = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(blob[i]));
  };
  const std::uint32_t trie_bytes = byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4)
    throw ConfigError(
        fmt::format("{}: the compiled character map's trie of {} bytes does not fit its {} bytes",
                    where, trie_bytes, blob.size()));
  units_.resize(trie_bytes / 4);
  for (std::size_t i = 0; i < units_.size(); ++i)
    units_[i] = byte(4 + 4 * i) | (byte(5 + 4 * i) << 8) | (byte(6 + 4 * i) << 16) |
                (byte(7 + 4 * i) << 24);
  normalized_ = blob.substr(4 + trie_bytes);
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  // darts-clone's commonPrefixSearch, stopping at the first (shortest) match.
  std::size_t node = 0;
  if (units_.empty()) return std::nullopt;
  node ^= offset_of(units_[0]);
  for (const char c : chunk) {
    const auto label = static_cast<std::uint32_t>(static_cast<unsigned char>(c));
    if (label == 0) return std::nullopt;
    node ^= label;
    if (node >= units_.size()) return std::nullopt;
    const std::uint32_t unit = units_[node];
    if (label_of(unit) != label) return std::nullopt;
    node ^= offset_of(unit);
    if (node >= units_.size()) return std::nullopt;
    if (has_leaf(unit)) {
      const std::uint32_t at = value_of(units_[node]);
      if (at >= normalized_.size()) return std::nullopt;
      const char* begin = normalized_.data() + at;
      const void* end = std::memchr(begin, '\0', normalized_.size() - at);
      if (end == nullptr) return std::nullopt;
      return std::string_view(begin,
                              static_cast<std::size_t>(static_cast<const char*>(end) - begin));
    }
  }
  return std::nullopt;
}

}  // namespace polyhal::text
