#include "polyhal/property.hpp"

namespace polyhal {

std::string_view provenance_name(Provenance p) noexcept {
  switch (p) {
    case Provenance::measured:
      return "measured";
    case Provenance::datasheet:
      return "datasheet";
    case Provenance::derived:
      return "derived";
    case Provenance::modelled:
      return "modelled";
  }
  return "?";
}

}  // namespace polyhal
