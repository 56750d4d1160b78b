#include "ipu_specs.hpp"

namespace polyhal::ipu {

const std::vector<PodSystem>& pod_systems() {
  static const std::vector<PodSystem> systems{
      {"POD4", 1}, {"POD16", 4}, {"POD64", 16}, {"POD128", 32}, {"POD256", 64}};
  return systems;
}

}  // namespace polyhal::ipu
