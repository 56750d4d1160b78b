#pragma once
// The tokenizers library's longest_first rule for a pair, shared by every
// tokenizer and truncation in the text layer.
#include <algorithm>
#include <cstddef>
#include <utility>

namespace polyhal::text {

/// How many tokens of a pair of `na` and `nb` tokens stay in `room`: the
/// shorter side whole when the longer can take the cut alone; else the
/// shorter keeps room/2 and the longer the rest (the first counts as the
/// shorter on a tie).
inline std::pair<std::size_t, std::size_t> longest_first_lengths(std::size_t na, std::size_t nb,
                                                                 std::size_t room) {
  if (na + nb <= room) return {na, nb};
  const bool a_shorter = na <= nb;
  std::size_t shorter = a_shorter ? na : nb;
  std::size_t longer = shorter > room ? shorter : std::max(shorter, room - shorter);
  if (shorter + longer > room) {
    shorter = room / 2;
    longer = shorter + room % 2;
  }
  return a_shorter ? std::pair{shorter, longer} : std::pair{longer, shorter};
}

}  // namespace polyhal::text
