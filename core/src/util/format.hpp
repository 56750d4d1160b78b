#pragma once
// Small formatting helpers shared inside libpolyhal (not installed).
#include <cstdint>
#include <string>
#include <string_view>

namespace polyhal::detail {

/// "1.50 GiB" style, binary units.
std::string human_bytes(std::uint64_t bytes);
/// "1.23 TFLOP/s" style, decimal units.
std::string human_flops(double flops_per_second);
/// `text` with ASCII letters lower-cased (names, keys and HTTP tokens:
/// never user text, which the tokenizers lower-case by Unicode's rules).
std::string ascii_lower(std::string_view text);
/// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace polyhal::detail
