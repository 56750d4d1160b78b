#pragma once
/// @file property.hpp
/// Named device properties that say where each figure comes from.
#include <string>
#include <string_view>

namespace polyhal {

/// Where a figure comes from. Nothing measured on hardware we did not run on
/// may be labelled `measured`.
enum class Provenance {
  measured,   ///< read or timed on this machine
  datasheet,  ///< vendor-published specification
  derived,    ///< computed from other figures (formula in the note)
  modelled,   ///< produced by a device model's assumptions
};
std::string_view provenance_name(Provenance p) noexcept;

/// One row of `polyhal devices`.
struct Property {
  std::string name;
  std::string value;
  Provenance source = Provenance::measured;
  std::string note;  ///< why/how: formula, datasheet name, caveat
};

}  // namespace polyhal
