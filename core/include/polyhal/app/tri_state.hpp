#pragma once
/// @file tri_state.hpp
/// A setting that is on, off, or left to the run (data.packed: detect from
/// the files; collective.overlap: when the MPI ranks span hosts). Written
/// auto, true or false in a config.
#include <cstdint>
#include <string_view>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

enum class TriState : std::uint8_t { automatic, yes, no };

/// "auto", "true" or "false": as a config writes it.
constexpr std::string_view tri_state_text(TriState state) {
  return state == TriState::yes ? "true" : state == TriState::no ? "false" : "auto";
}

}  // namespace polyhal
