#pragma once
/// @file suggest.hpp
/// "Did you mean" for names a person typed: config keys, commands, options.
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// The candidate closest to `typed` (Levenshtein distance at most 2, and
/// less than the typed word's length), or nullopt when none is close.
std::optional<std::string> nearest_word(const std::string& typed,
                                        const std::vector<std::string>& candidates);

}  // namespace polyhal
