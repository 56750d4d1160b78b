#include "ipu_specs.hpp"

namespace polyhal::ipu {

const std::vector<IpuGeneration>& ipu_generations() {
  constexpr std::uint64_t GB = 1000ull * 1000 * 1000;
  static const std::vector<IpuGeneration> generations{
      // IPU-M2000: 250 TFLOP/s FP16.16, 62.5 FP32 per IPU, 47.5 TB/s, up to 448 GB DDR.
      {"mk2", "GC200 Mk2 IPU", "IPU-M2000", 250e12, 62.5e12, 47.5e12, 448 * GB / 4},
      // Bow-2000: 350 TFLOP/s FP16.16, 87.5 FP32 per IPU, 65 TB/s, up to 256 GB DDR.
      {"bow", "Bow IPU", "Bow-2000", 350e12, 87.5e12, 65e12, 256 * GB / 4},
  };
  return generations;
}

const std::vector<PodSystem>& pod_systems() {
  static const std::vector<PodSystem> systems{
      {"POD4", 1}, {"POD16", 4}, {"POD64", 16}, {"POD128", 32}, {"POD256", 64}};
  return systems;
}

}  // namespace polyhal::ipu
